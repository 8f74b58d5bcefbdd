"""Names of a dataset's files on storage: the one place that spells the layout.

::

    root/
      description.parquet                 the log as a flat table (derived)
      _log/00000000000000000001.json      one immutable entry per commit (the truth)
      _log/checkpoint-…0100.parquet       all entries up to a sequence
      _log/_last_checkpoint               a hint: the newest checkpoint's sequence
      _log/_created                       written before the first revision folder is claimed
      <revision>/_claimed                 the claim of a revision folder
      <revision>/<table>/part-….parquet   the data

``_log/_created`` lets an open tell "a first commit is in progress" (revision folders,
the marker, no entry yet) from "the log was lost" (revision folders, no marker).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import DatasetNotFoundError, RevisionsError, StorageError
from ..storage.base import Storage

LOG_DIR = "_log"
DESCRIPTION = "description.parquet"
LAST_CHECKPOINT = f"{LOG_DIR}/_last_checkpoint"
LOG_MARKER = f"{LOG_DIR}/_created"
#: marker created exclusively in a revision folder before any data is written to it
CLAIM_FILE = "_claimed"

_ENTRY_NAME = re.compile(r"^(\d{20})\.json$")
#: temporary files of writers: ``.<name>.<hex>.tmp`` (local) and the S3 write probe
_TEMP_NAME = re.compile(r"^\..+\.tmp$|^\.conditional-write-probe-")


def entry_name(sequence: int) -> str:
    return f"{sequence:020d}.json"


def entry_path(sequence: int) -> str:
    return f"{LOG_DIR}/{entry_name(sequence)}"


def checkpoint_path(sequence: int) -> str:
    return f"{LOG_DIR}/checkpoint-{sequence:020d}.parquet"


def entry_sequence(name: str) -> int | None:
    """The sequence of a log entry's file name (``…0042.json`` → 42); None for other names."""
    match = _ENTRY_NAME.match(name)
    return int(match.group(1)) if match else None


def holds_log(folder: str, paths: Iterable[str]) -> bool:
    """Whether ``paths`` (relative to a root) hold a log in ``folder``: a dataset of its
    own inside another dataset's root, which no check or maintenance of that root may
    treat as a leftover."""
    prefix = f"{folder}/{LOG_DIR}/"
    return any(p.startswith(prefix) for p in paths)


def is_temp_name(name: str) -> bool:
    """A leftover of a writer that died or failed between writing a temporary file and
    renaming it: harmless, reclaimed by vacuum."""
    return bool(_TEMP_NAME.match(name))


def not_a_dataset(storage: Storage) -> RevisionsError:
    """The refusal of a root without a log: a root that does not exist says so (a mistyped
    path, most likely), one that exists says that it has no ``_log/``; a root that is a
    file (an object on S3) is a StorageError (a local one is refused on open already)."""
    if not storage.exists(""):
        return DatasetNotFoundError(f"{storage.uri} does not exist: no revisioned dataset there")
    if storage.is_file(""):
        return StorageError(
            f"root {storage.uri} is a regular file (an object), not a folder: a dataset root "
            "is a folder (missing is fine: the first commit creates it)"
        )
    return DatasetNotFoundError(f"{storage.uri} is not a revisioned dataset (no {LOG_DIR}/)")
