"""Where a dataset's bytes live: the small-object operations the log needs.

The log needs exactly one strong primitive, *create if absent*: a local
filesystem gives it by hard-linking a fully written temporary file (atomic,
fails if the target exists); object stores give it by conditional PUT
(``If-None-Match: *``). Everything else is plain read/write/list.

Data files are written and read by Spark; this layer only lists them (to record
what a revision wrote, with their modification times for vacuum) and deletes them
(failed writes, vacuumed revisions).
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

from .errors import StorageError


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative to the dataset root, '/'-separated
    size: int
    modified: datetime | None = None  # last modification (local mtime, S3 LastModified), UTC


class Storage(ABC):
    """Operations on paths relative to one dataset root."""

    #: the root as the user gave it, normalized (shown in metadata and errors)
    uri: str

    @abstractmethod
    def spark_uri(self, rel: str = "") -> str:
        """The URI Spark uses for ``rel`` (``file:///…``, ``s3a://…``)."""

    @abstractmethod
    def read(self, rel: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""

    @abstractmethod
    def write(self, rel: str, data: bytes) -> None:
        """Replace (or create) the object atomically: readers see old or new bytes."""

    @abstractmethod
    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create the object only if absent; True when created, False when it existed."""

    @abstractmethod
    def list_files(self, rel_prefix: str) -> list[FileInfo]:
        """Every file below ``rel_prefix`` (recursively), sorted by path."""

    @abstractmethod
    def exists(self, rel: str) -> bool: ...

    @abstractmethod
    def delete_tree(self, rel_prefix: str) -> None:
        """Delete everything below ``rel_prefix``; missing is fine."""

    def delete_files(self, rels: Sequence[str]) -> None:
        """Delete these files; missing ones are fine."""
        for rel in rels:
            self.delete_tree(rel)


class LocalStorage(Storage):
    """A dataset root on a local (or mounted POSIX) filesystem."""

    def __init__(self, root: str | os.PathLike[str]):
        path = str(root)
        if path.startswith("file://"):
            path = urlparse(path).path
        self.base = Path(path).expanduser().resolve()
        self.uri = str(self.base)

    def _abs(self, rel: str) -> Path:
        return self.base / rel if rel else self.base

    def spark_uri(self, rel: str = "") -> str:
        return self._abs(rel).as_uri()

    def read(self, rel: str) -> bytes | None:
        try:
            return self._abs(rel).read_bytes()
        except FileNotFoundError:
            return None

    def _temp_beside(self, target: Path, data: bytes) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return tmp

    def write(self, rel: str, data: bytes) -> None:
        target = self._abs(rel)
        tmp = self._temp_beside(target, data)
        os.replace(tmp, target)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        target = self._abs(rel)
        tmp = self._temp_beside(target, data)
        try:
            os.link(tmp, target)  # atomic; fails if target exists; content already complete
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise StorageError(f"cannot create {target}: {exc}") from exc
            # filesystems without hard links: O_EXCL create, then fill (rare; still exclusive)
            return self._create_excl_fallback(target, data)
        finally:
            tmp.unlink(missing_ok=True)

    @staticmethod
    def _create_excl_fallback(target: Path, data: bytes) -> bool:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return True

    def list_files(self, rel_prefix: str) -> list[FileInfo]:
        top = self._abs(rel_prefix)
        if not top.exists():
            return []
        out = []
        for dirpath, _dirs, files in os.walk(top):
            for name in files:
                full = Path(dirpath) / name
                try:
                    stat = full.stat()
                except FileNotFoundError:  # removed meanwhile (a temporary file)
                    continue
                modified = datetime.fromtimestamp(stat.st_mtime, UTC)
                out.append(FileInfo(full.relative_to(self.base).as_posix(), stat.st_size, modified))
        return sorted(out, key=lambda f: f.path)

    def exists(self, rel: str) -> bool:
        return self._abs(rel).exists()

    def delete_tree(self, rel_prefix: str) -> None:
        target = self._abs(rel_prefix)
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
