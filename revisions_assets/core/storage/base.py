"""Where a dataset's bytes live: the small-object operations the log needs.

The log needs exactly one strong primitive, *create if absent*: a local
filesystem gives it by hard-linking a fully written temporary file (atomic,
fails if the target exists); object stores give it by conditional PUT
(``If-None-Match: *``). Everything else is plain read/write/list.

Data files are written and read by Spark; this layer only lists them (to record
what a revision wrote, with their modification times for vacuum) and deletes them
(failed writes, vacuumed revisions).

Paths are confined to the root: a relative path with ``..``, an absolute path, or
(on a local filesystem) a symbolic link resolving outside the root raises
``PathEscapeError``; every other failure of the filesystem (disk full, permission
denied, name too long) is a ``StorageError`` naming the path.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..errors import InvalidArgumentError, PathEscapeError, StorageError


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative to the dataset root, '/'-separated
    size: int
    modified: datetime | None = None  # last modification (local mtime, S3 LastModified), UTC


def check_relative(rel: str) -> str:
    """``rel`` if it is a '/'-separated path below the root: not absolute, no ``..``,
    no backslash, no scheme. The one textual rule for every backend and for log entries."""
    if not isinstance(rel, str):
        raise PathEscapeError(f"path {rel!r} is not a string")
    parts = rel.split("/")
    if rel.startswith("/") or "\\" in rel or "\0" in rel or ":" in parts[0] or ".." in parts:
        raise PathEscapeError(
            f"path {rel!r} is not confined to the dataset root: paths must be relative, "
            "'/'-separated, without '..'"
        )
    return rel


#: what Spark's file sources (``SparkHadoopUtil.isGlobPath``), Hadoop's globbing
#: (``GlobPattern``: ``*?[]{}``, backslash escapes, ``,`` inside braces) and Polars read as a
#: pattern in a path: the engine never writes a name holding one
PATTERN_CHARACTERS = frozenset("*?[]{}\\")


def pattern_characters(rel: str) -> str:
    """The pattern characters ``rel`` holds, sorted ("" for a plain name)."""
    return "".join(sorted(PATTERN_CHARACTERS.intersection(rel)))


def check_data_file(rel: str) -> str:
    """``rel`` if it is a data file path a log may name: confined to the root
    (``check_relative``) and without a pattern character. Data files are always opened by
    their literal path; a name the engine never writes is refused as well, since a
    dataset is untrusted input (an engine that globbed it could read other files, outside
    the root too)."""
    check_relative(rel)
    found = pattern_characters(rel)
    if found:
        raise PathEscapeError(
            f"data file path {rel!r} holds the pattern character(s) {found!r}: "
            "revisions-assets never writes such a name, and an engine that expands patterns "
            "would read other files than it names (outside the dataset root too)"
        )
    return rel


class Storage(ABC):
    """Operations on paths relative to one dataset root."""

    #: the root as the user gave it, normalized (shown in metadata and errors; never
    #: holds credentials: roots that embed them are refused)
    uri: str

    @abstractmethod
    def spark_uri(self, rel: str = "") -> str:
        """The URI Spark uses for ``rel`` (``file:///…``, ``s3a://…``)."""

    @abstractmethod
    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        """The object's bytes, or None when it does not exist. ``limit``: at most ``limit + 1``
        bytes are read (more than ``limit`` says the object is larger): a file of a few
        bytes (a log entry, the checkpoint hint) may be a sparse file of gigabytes."""

    @abstractmethod
    def read_tail(self, rel: str, length: int) -> bytes | None:
        """The last ``length`` bytes of the object (all of it when shorter), or None when it
        does not exist: a Parquet footer without fetching the data."""

    @abstractmethod
    def read_tail_sized(self, rel: str, length: int) -> tuple[bytes, int] | None:
        """The last ``length`` bytes of the object and its size in bytes, in one request, or
        None when it does not exist: a footer checked against the size the log records."""

    @abstractmethod
    def read_range(self, rel: str, offset: int, length: int) -> bytes | None:
        """``length`` bytes of the object from ``offset`` (fewer at its end), in one
        request, or None when it does not exist: column chunks without the rest of a file."""

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
    def list_names(self, rel_prefix: str, start_after: str | None = None) -> list[str]:
        """The names directly below ``rel_prefix``, sorted; folders end with ``/``.

        ``start_after``: only names sorting after it (S3 lists from there, so looking past
        a log's head costs one request however long the log is)."""

    @abstractmethod
    def exists(self, rel: str) -> bool: ...

    def is_file(self, rel: str) -> bool:
        """Whether ``rel`` is a file (an object) with nothing below it, not a folder."""
        return self.exists(rel) and not self.list_names(rel)

    @abstractmethod
    def delete_tree(self, rel_prefix: str) -> None:
        """Delete everything below ``rel_prefix``; missing is fine."""

    def check_inside(self, rel: str) -> None:
        """Raise PathEscapeError unless ``rel`` stays inside the root."""
        check_relative(rel)

    def delete_files(self, rels: Sequence[str]) -> None:
        """Delete these files; missing ones are fine."""
        for rel in rels:
            self.delete_tree(rel)


class LocalStorage(Storage):
    """A dataset root on a local (or mounted POSIX) filesystem."""

    def __init__(self, root: str | os.PathLike[str]):
        path = os.fspath(root)
        if path.startswith("file://"):
            parsed = urlparse(path)
            if parsed.netloc not in ("", "localhost"):
                raise InvalidArgumentError(
                    f"root {path!r} names the host {parsed.netloc!r}: a file:// root must be "
                    "local (file:///path)"
                )
            path = unquote(parsed.path)
        if not path.strip():
            raise InvalidArgumentError(
                f"root {root!r} is empty: give a directory (an empty root would silently be "
                "the current directory) or s3://bucket/prefix"
            )
        with _os_errors("open root", path):
            self.base = Path(path).expanduser().resolve()
            if self.base.exists() and not self.base.is_dir():
                raise StorageError(
                    f"root {self.base} is a regular file, not a directory: a dataset root is "
                    "a directory (missing is fine: the first commit creates it)"
                )
            above = next((p for p in self.base.parents if p.exists()), None)
            if not self.base.exists() and above is not None and not above.is_dir():
                raise StorageError(
                    f"root {self.base} lies below {above}, a regular file, not a directory: "
                    "a dataset root is a directory (missing is fine: the first commit "
                    "creates it)"
                )
        self.uri = str(self.base)

    def __repr__(self) -> str:
        return f"LocalStorage({self.uri!r})"

    def _os_errors(self, operation: str, rel: str) -> AbstractContextManager[None]:
        return _os_errors(operation, f"{self.uri}/{rel}" if rel else self.uri)

    def _abs(self, rel: str) -> Path:
        """The absolute path of ``rel``; refused if it or a symlink on its way leaves the root."""
        check_relative(rel)
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        target = Path(posixpath.join(self.uri, *parts))
        walked = self.uri
        # only symlinks below the (resolved) base can lead out of it: one lstat per folder
        # on the way (a read of 100,000 files walks 300,000)
        for n, part in enumerate(parts, start=1):
            walked = f"{walked}/{part}"
            try:
                linked = stat.S_ISLNK(os.lstat(walked).st_mode)
            except (FileNotFoundError, NotADirectoryError):
                break  # the rest is created below a real folder of the root
            if linked:
                resolved = Path(os.path.realpath(target))
                if resolved != self.base and not resolved.is_relative_to(self.base):
                    raise PathEscapeError(
                        f"{rel!r} resolves outside the dataset root {self.base} "
                        f"({'/'.join(parts[:n])} is a symbolic link to "
                        f"{os.readlink(walked)}): refused"
                    )
                break
        return target

    def check_inside(self, rel: str) -> None:
        with self._os_errors("resolve", rel):
            self._abs(rel)

    def local_path(self, rel: str) -> Path:
        """The absolute path of ``rel`` (what a reader in this process opens)."""
        with self._os_errors("resolve", rel):
            return self._abs(rel)

    def spark_uri(self, rel: str = "") -> str:
        # the path as it is: Hadoop quotes what a URI must quote itself, and would quote the
        # escapes of Path.as_uri() again (a folder "a b" became "a%2520b": not found)
        with self._os_errors("resolve", rel):
            return "file://" + self._abs(rel).as_posix()

    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        with self._os_errors("read", rel):
            path = self._abs(rel)
            try:
                if limit is None:
                    return path.read_bytes()
                with open(path, "rb") as fh:  # (read(n) allocates n bytes up front)
                    return fh.read(min(limit, os.fstat(fh.fileno()).st_size) + 1)
            except FileNotFoundError:
                if path.is_symlink():
                    raise StorageError(
                        f"read {path}: a dangling symbolic link (to {os.readlink(path)}) stands "
                        "where a file is expected; remove it"
                    ) from None
                return None

    def read_tail(self, rel: str, length: int) -> bytes | None:
        tail = self.read_tail_sized(rel, length)
        return None if tail is None else tail[0]

    def read_range(self, rel: str, offset: int, length: int) -> bytes | None:
        with self._os_errors("read", rel):
            try:
                with open(self._abs(rel), "rb") as fh:
                    fh.seek(offset)
                    return fh.read(length)
            except FileNotFoundError:
                return None

    def read_tail_sized(self, rel: str, length: int) -> tuple[bytes, int] | None:
        with self._os_errors("read", rel):
            try:
                with open(self._abs(rel), "rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, size - length))
                    return fh.read(), size
            except FileNotFoundError:
                return None

    @contextmanager
    def _staged(self, target: Path, data: bytes) -> Iterator[Path]:
        """A fully written temporary file next to ``target``, always removed afterwards; on
        failure the folders created for it are removed too (when still empty)."""
        made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            yield tmp
        except BaseException:
            tmp.unlink(missing_ok=True)
            for folder in made:  # innermost first
                _remove_empty_dir(folder)
            raise
        finally:
            tmp.unlink(missing_ok=True)

    def write(self, rel: str, data: bytes) -> None:
        with self._os_errors("write", rel):
            target = self._abs(rel)
            with self._staged(target, data) as tmp:
                os.replace(tmp, target)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        with self._os_errors("create", rel):
            target = self._abs(rel)
            with self._staged(target, data) as tmp:
                try:
                    os.link(tmp, target)  # atomic; fails if target exists; content complete
                    return True
                except FileExistsError:
                    return False
                except OSError as exc:
                    if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                        raise
            # filesystems without hard links: O_EXCL create, then fill (rare; still exclusive)
            return self._create_excl_fallback(target, data)

    @staticmethod
    def _create_excl_fallback(target: Path, data: bytes) -> bool:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            target.unlink(missing_ok=True)  # never leave a partial object behind
            raise
        return True

    def list_files(self, rel_prefix: str) -> list[FileInfo]:
        def fail(exc: OSError) -> None:
            if isinstance(exc, FileNotFoundError):
                return  # a folder removed while we listed (a writer's temporary folder)
            raise exc

        with self._os_errors("list", rel_prefix):
            top = self._abs(rel_prefix)
            if not top.exists():
                return []
            out = []
            for dirpath, _dirs, files in os.walk(top, onerror=fail):
                for name in files:
                    full = Path(dirpath) / name
                    try:
                        stat = full.stat()
                    except FileNotFoundError:
                        continue  # removed while we listed (or a dangling link)
                    modified = datetime.fromtimestamp(stat.st_mtime, UTC)
                    rel = full.relative_to(self.base).as_posix()
                    out.append(FileInfo(rel, stat.st_size, modified))
        return sorted(out, key=lambda f: f.path)

    def list_names(self, rel_prefix: str, start_after: str | None = None) -> list[str]:
        with self._os_errors("list", rel_prefix):
            top = self._abs(rel_prefix)
            try:
                entries = list(os.scandir(top))
            except (FileNotFoundError, NotADirectoryError):
                return []
            names = [e.name + "/" if e.is_dir(follow_symlinks=False) else e.name for e in entries]
        return sorted(n for n in names if start_after is None or n > start_after)

    def exists(self, rel: str) -> bool:
        with self._os_errors("stat", rel):
            return self._abs(rel).exists()

    def is_file(self, rel: str) -> bool:
        with self._os_errors("stat", rel):
            return self._abs(rel).is_file()

    def delete_tree(self, rel_prefix: str) -> None:
        with self._os_errors("delete", rel_prefix):
            target = self._abs(rel_prefix)
            if target.is_symlink():
                target.unlink()  # the link, never what it points to
            elif target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)


def _remove_empty_dir(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty (another writer uses it) or already gone


@contextmanager
def _os_errors(operation: str, path: str) -> Iterator[None]:
    """Turn a filesystem failure into a StorageError that names the path and the reason."""
    try:
        yield
    except OSError as exc:
        where = exc.filename or path
        reason = exc.strerror or type(exc).__name__
        raise StorageError(f"{operation} {where}: {reason} [errno {exc.errno}]") from exc
    except RuntimeError as exc:  # pathlib's "Symlink loop" before Python 3.13
        raise StorageError(f"{operation} {path}: {exc}") from exc
