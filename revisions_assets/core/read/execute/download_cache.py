"""The download cache of ``DatasetReader`` (the original library's ``cache_mode``).

A local folder mirroring a dataset root: the data files reads needed, under their paths
relative to the root, and the log as one checkpoint (``_log/``), which is all an offline
reader opens. Data files are immutable, so a cached file is never fetched again; the log
is rewritten on every online open. After a purge or a vacuum, files no live revision
references any more are removed from the cache on the next online open, so erased rows
do not outlive the erasure on a laptop.
"""

from __future__ import annotations

import io
import json
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq

from ...errors import NotCachedError
from ...log.layout import LAST_CHECKPOINT, LOG_DIR, LOG_MARKER, checkpoint_path, is_temp_name
from ...log.records import Revision
from ...log.revision_log import checkpoint_table
from ...storage.base import LocalStorage, Storage, check_data_file

#: downloads of more files than this show a progress bar (on a terminal only)
PROGRESS_MIN_FILES = 8
_THREADS = 8


class DownloadCache:
    """The cache folder of one dataset; ``source`` is None when offline (nothing fetched).

    ``owner(path)`` names the revision of a data file in error messages.
    """

    def __init__(self, folder: str | os.PathLike[str], source: Storage | None):
        self.folder = Path(folder).expanduser().resolve()
        self.source = source
        self.fetched = 0  #: files fetched by this handle (what the cache saved is the rest)

    def storage(self) -> LocalStorage:
        """The cache as a dataset root: what an offline reader opens."""
        return LocalStorage(self.folder)

    def path(self, rel: str) -> Path:
        """Where the cache keeps ``rel``: a data file path a log may name (never out of the
        cache folder, never a pattern: ``check_data_file``)."""
        return self.folder.joinpath(*check_data_file(rel).split("/"))

    def local(self, files: Sequence[str], owner: Callable[[str], str]) -> list[str]:
        """The local paths of ``files``, fetching those not cached yet (a file the source
        lacks stays absent: the file gate, ``execute/files.py``, names it)."""
        missing = [f for f in dict.fromkeys(files) if not self.path(f).is_file()]
        if missing:
            if self.source is None:
                raise NotCachedError(
                    f"offline read of {self.folder}: data file {missing[0]} of revision "
                    f"{owner(missing[0])!r} is not in the cache"
                    + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                    + "; open the reader online (offline=False) or download() it first"
                )
            self._fetch(missing)
        return [str(self.path(f)) for f in files]

    def _fetch(self, files: Sequence[str]) -> None:
        source = self.source
        assert source is not None

        def fetch(rel: str) -> int:
            data = source.read(rel)
            if data is None:
                return 0
            _write_atomically(self.path(rel), data)
            return len(data)

        with ThreadPoolExecutor(min(_THREADS, len(files))) as pool, _progress(len(files)) as step:
            for size in pool.map(fetch, files):
                self.fetched += 1
                step(size)

    def save_log(self, records: Sequence[Revision], root: str) -> None:
        """The log of the dataset at ``root`` as one checkpoint, replacing the previous one."""
        if not records:
            return
        head = records[-1].sequence
        buf = io.BytesIO()
        pq.write_table(
            checkpoint_table(records, root), buf, compression="zstd", use_dictionary=False
        )
        _write_atomically(self.path(checkpoint_path(head)), buf.getvalue())
        _write_atomically(self.path(LAST_CHECKPOINT), json.dumps({"sequence": head}).encode())
        _write_atomically(self.path(LOG_MARKER), b"")
        keep = {Path(checkpoint_path(head)).name, Path(LAST_CHECKPOINT).name, Path(LOG_MARKER).name}
        for stale in self.path(LOG_DIR).iterdir():
            if stale.name not in keep:
                stale.unlink(missing_ok=True)

    def prune(self, live: set[str]) -> list[str]:
        """Remove the cached data files that ``live`` (what the log references) lacks."""
        removed = []
        for dirpath, dirnames, filenames in os.walk(self.folder, topdown=True):
            rel_dir = Path(dirpath).relative_to(self.folder).as_posix()
            if rel_dir == LOG_DIR:
                dirnames[:] = []
                continue
            for name in filenames:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if rel not in live and not is_temp_name(name):  # another fetch is writing it
                    (Path(dirpath) / name).unlink(missing_ok=True)
                    removed.append(rel)
        for dirpath, _, _ in sorted(os.walk(self.folder), key=lambda w: -len(w[0])):
            if Path(dirpath) != self.folder and not any(Path(dirpath).iterdir()):
                Path(dirpath).rmdir()
        return removed


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        temp.write_bytes(data)
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


class _progress:
    """A progress bar on stderr for downloads of more than a few files; quiet when stderr
    is not a terminal. Used as ``with _progress(n) as step: step(bytes)``."""

    def __init__(self, total: int):
        self.total = total
        self.bar = None

    def __enter__(self) -> Callable[[int], None]:
        if self.total > PROGRESS_MIN_FILES and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            task = self.bar.add_task(f"downloading {self.total} files", total=self.total)
            return lambda _size: self.bar.advance(task)  # type: ignore[union-attr]
        return lambda _size: None

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
