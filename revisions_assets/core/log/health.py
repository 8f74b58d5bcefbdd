"""Is the log whole and well formed? Checks made when a log is opened and read.

* ``parse_entry``: a log entry's bytes (at most ``MAX_ENTRY_BYTES``: no more is read of
  one) become a ``Revision`` only when every field has the right type (``is_major`` a real
  bool, counts non-negative ints, file stats one per file with bounds of the ids' types, …)
  and every recorded file path stays inside the root and holds no pattern character
  (``storage.base``); otherwise ``CorruptLogError`` names the file and what is wrong (never
  an AttributeError, never ``bool("False")``). A checkpoint's records get the same checks
  (``entry_problem``, from ``revision_log.records_of_checkpoint``).
* ``check_log_health``: after an open has read the log up to its head, nothing may lie
  beyond it (an entry past a missing one is a gap), and an empty log must really be an
  empty dataset, not a lost ``_log/``. It lists the names after the head only (one
  request on S3) and parses nothing, so opening stays cheap.

Neither writes anything: a dataset whose log is damaged is left as it is for the
operator (``RevisionedDataset.maintenance.verify()`` lists what is wrong, the docs'
recovery guide says how to repair it).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError, LegacyLayoutError, PathEscapeError
from ..storage.base import Storage, check_relative, pattern_characters
from .layout import (
    CLAIM_FILE,
    DESCRIPTION,
    LOG_DIR,
    LOG_MARKER,
    entry_name,
    entry_path,
    entry_sequence,
)
from .records import (
    KINDS,
    PURGE,
    SHA256_HEX,
    Revision,
    decode_id_value,
    id_types,
    load_json,
)

REPAIR_HINT = (
    "nothing is written to this dataset until the log is repaired: run `revisions verify` "
    "(ds.maintenance.verify()) and see 'Recovering a damaged dataset' in the docs"
)


#: the largest entry the log accepts (one that large lists some 100,000 files): JSON is
#: decoded only below it, in a checkpoint's records too
MAX_ENTRY_BYTES = 64 * 2**20


def parse_entry(raw: bytes, sequence: int, root: str) -> Revision:
    """The revision recorded in log entry ``sequence`` of the dataset at ``root`` (its
    relative upstream roots resolved against it), or CorruptLogError naming the file."""
    path = entry_path(sequence)
    if len(raw) > MAX_ENTRY_BYTES:
        raise CorruptLogError(
            f"{root}: log entry {path} is larger than any entry (more than "
            f"{MAX_ENTRY_BYTES} bytes); {REPAIR_HINT}"
        )
    try:
        doc = load_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptLogError(
            f"{root}: log entry {path} is not valid JSON ({exc}); {REPAIR_HINT}"
        ) from None
    problem = entry_problem(doc)
    if problem is None and doc["sequence"] != sequence:
        problem = f"claims sequence {doc['sequence']}"
    if problem is not None:
        raise CorruptLogError(f"{root}: log entry {path} {problem}; {REPAIR_HINT}")
    try:
        return Revision.from_json(raw, root)
    except Exception as exc:  # a shape entry_problem() does not know yet
        raise CorruptLogError(
            f"{root}: log entry {path} cannot be read: {type(exc).__name__}: {exc}; {REPAIR_HINT}"
        ) from exc


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _optional_text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and SHA256_HEX.match(value) is not None


def _field_problem(
    doc: Mapping[str, Any],
    key: str,
    ok: Callable[[Any], bool],
    what: str,
    *,
    required: bool = True,
    where: str = "",
) -> str | None:
    if key not in doc:
        return f"lacks the field {where}{key!r}" if required else None
    if not ok(doc[key]):
        return f"has {where}{key!r} = {json.dumps(doc[key])[:60]}, expected {what}"
    return None


def _fields_problem(
    doc: Mapping[str, Any],
    fields: tuple[tuple[str, Callable[[Any], bool], str, bool], ...],
    where: str,
) -> str | None:
    """The first of ``fields`` that ``doc`` lacks (when required) or holds with a wrong type
    (a checkpoint checks thousands of records on open: one loop, no call per field)."""
    for key, ok, what, required in fields:
        if key in doc:
            if not ok(doc[key]):
                return _field_problem(doc, key, ok, what, where=where)
        elif required:
            return _field_problem(doc, key, ok, what, where=where)
    return None


_TOP_FIELDS: tuple[tuple[str, Callable[[Any], bool], str, bool], ...] = (
    ("name", lambda v: _is_text(v) and v != "", "a non-empty string", True),
    ("timestamp_us", _is_int, "an integer (microseconds)", True),
    ("is_major", _is_bool, "true or false", True),
    ("version", _optional_text, "a string or null", False),
    ("sequence", lambda v: _is_int(v) and v >= 1, "an integer >= 1", True),
    ("committed_at_us", _is_int, "an integer (microseconds)", True),
    ("tables", lambda v: isinstance(v, dict), "an object", True),
    ("producer", lambda v: isinstance(v, dict), "an object", False),
    ("upstream", lambda v: isinstance(v, list), "a list", False),
    ("data_change", _is_bool, "true or false", False),
    (
        "kind",
        lambda v: v in KINDS,
        f"one of {sorted(KINDS)} (an entry of a newer revisions-assets?)",
        False,
    ),
    ("properties", lambda v: isinstance(v, dict), "an object", False),
    ("previous_sha256", _is_sha256, "a sha256 digest (64 hex digits)", False),
)
_TABLE_FIELDS: tuple[tuple[str, Callable[[Any], bool], str, bool], ...] = (
    (
        "id_columns",
        lambda v: isinstance(v, list) and bool(v) and all(_is_text(c) for c in v),
        "a non-empty list of strings",
        True,
    ),
    (
        "schema",
        lambda v: isinstance(v, dict) and isinstance(v.get("fields"), list),
        "a Spark schema object",
        True,
    ),
    ("version", _optional_text, "a string or null", False),
    ("rows", _is_count, "a count >= 0", True),
    ("tombstones", _is_count, "a count >= 0", True),
    (
        "files",
        lambda v: isinstance(v, list) and all(_is_text(f) for f in v),
        "a list of paths",
        True,
    ),
    ("bytes", _is_count, "a count >= 0", True),
    ("rows_offered", lambda v: v is None or _is_count(v), "a count >= 0 or null", False),
    ("compared_with", lambda v: v is None or _is_count(v), "a sequence >= 0 or null", False),
    (
        "field_versions",
        lambda v: v is None or (isinstance(v, dict) and all(_is_text(x) for x in v.values())),
        "an object of strings or null",
        False,
    ),
)


def entry_problem(doc: Any) -> str | None:
    """What is wrong with a decoded log entry, or None when its shape is right.

    Unknown fields are allowed (newer writers may add some); known ones must have their type.
    """
    if not isinstance(doc, dict):
        return f"is a JSON {type(doc).__name__}, not an object"
    problem = _fields_problem(doc, _TOP_FIELDS, "")
    if problem:
        return problem
    for table, write in doc["tables"].items():
        problem = _write_problem(table, write, f"tables.{table}.")
        if problem:
            return problem
    if doc.get("kind") == PURGE:
        problem = _purge_problem(doc.get("purge"), doc["sequence"])
        if problem:
            return problem
    for position in doc.get("upstream") or []:
        if not (
            isinstance(position, dict)
            and _is_text(position.get("dataset"))
            and _is_text(position.get("table"))
            and _is_count(position.get("sequence"))
        ):
            shown = json.dumps(position)[:60]
            return f"has an upstream position {shown} without dataset/table/sequence"
    return None


def _write_problem(table: Any, write: Any, where: str) -> str | None:
    """What is wrong with one table's write (a ``tables`` value, or a purge's new write)."""
    if not table or "/" in table or "\\" in table or table in (".", ".."):
        return f"names a table {table!r} that is not a plain name"
    if not isinstance(write, dict):
        return f"has {where[:-1]!r} = {json.dumps(write)[:60]}, expected an object"
    problem = _fields_problem(write, _TABLE_FIELDS, where)
    if problem:
        return problem
    for file in write["files"]:
        try:
            check_relative(file)
        except PathEscapeError:
            return f"references the file {file!r} outside the dataset root"
        if pattern_characters(file):
            return (
                f"references the file {file!r}, whose name holds the pattern character(s) "
                f"{pattern_characters(file)!r}, which revisions-assets never writes"
            )
    return _file_stats_problem(write, where)


#: the counts of one file's stats (``FileStats``)
_STATS_COUNTS = ("rows", "bytes", "row_groups", "footer_offset", "footer_length")


def _file_stats_problem(write: dict[str, Any], where: str) -> str | None:
    """What is wrong with a write's ``file_stats`` (absent or null in entries written
    before): one object per file, counts, a digest, and id bounds of the ids' types."""
    stats = write.get("file_stats")
    if stats is None:
        return None
    where = f"{where}file_stats"
    if not isinstance(stats, list) or len(stats) != len(write["files"]):
        return f"has {where!r} that is not a list of one object per file"
    try:
        types = id_types(json.dumps(write["schema"]), write["id_columns"])
    except (AttributeError, TypeError, ValueError):
        return f"has a schema whose fields are not objects ({where})"
    for n, one in enumerate(stats):
        at = f"{where}[{n}]"
        if not isinstance(one, dict):
            return f"has {at!r} that is not an object"
        for key in _STATS_COUNTS:
            if not _is_count(one.get(key)):
                return f"has {at}.{key} = {json.dumps(one.get(key))[:60]}, expected a count >= 0"
        if not _is_sha256(one.get("footer_sha256")):
            return f"has {at}.footer_sha256 that is not a sha256 digest (64 hex digits)"
        for key in ("id_min", "id_max"):
            bounds = one.get(key)
            if not isinstance(bounds, list) or len(bounds) != len(types):
                return f"has {at}.{key} that is not a list of one value per id column"
            for type_name, value in zip(types, bounds, strict=True):
                try:
                    decode_id_value(type_name, value)
                except ValueError as exc:
                    return f"has {at}.{key}: {exc}"
    return None


def _purge_problem(purge: Any, sequence: int) -> str | None:
    """What is wrong with the ``purge`` object of a purge entry at ``sequence``."""
    if not (
        isinstance(purge, dict)
        and _is_text(purge.get("reason"))
        and _is_count(purge.get("entities"))
        and isinstance(purge.get("swaps"), dict)
    ):
        return "is a purge without a purge object (reason, entities, swaps)"
    for table, swaps in purge["swaps"].items():
        if not isinstance(swaps, list):
            return f"has purge.swaps.{table} that is not a list"
        for swap in swaps:
            if not (
                isinstance(swap, dict)
                and _is_int(swap.get("sequence"))
                and 1 <= swap["sequence"] < sequence
                and _is_count(swap.get("rows_removed"))
            ):
                return f"has a purge swap of table {table!r} without an earlier sequence"
            problem = _write_problem(table, swap.get("write"), f"purge.swaps.{table}.write.")
            if problem:
                return problem
    return None


def check_log_health(storage: Storage, head: int) -> None:
    """Raise CorruptLogError unless the log read up to ``head`` is the whole log."""
    # an empty log: gather the signs of an existing dataset *before* listing the log, so
    # that a first commit landing meanwhile is seen by the listing (entry, then description)
    if head == 0:
        refuse_legacy_layout(storage)
    lost = lost_log_evidence(storage) if head == 0 else None
    beyond = _check_nothing_beyond(storage, head)
    if lost and not beyond:
        raise CorruptLogError(f"{storage.uri}: {lost}; {REPAIR_HINT}")


def _check_nothing_beyond(storage: Storage, head: int) -> int:
    """How many entries lie past the head: fine only as the next ones (committed while we
    opened); an entry past a missing one is a gap."""
    names = storage.list_names(LOG_DIR, start_after=entry_name(head))
    expected = head + 1
    for sequence in sorted(s for s in map(entry_sequence, names) if s is not None):
        while expected < sequence:
            if not storage.exists(entry_path(expected)):
                raise CorruptLogError(
                    f"{storage.uri}: the log has a gap: {entry_path(sequence)} exists but "
                    f"{entry_path(expected)} is missing (the log reads up to sequence {head}); "
                    f"an entry was deleted or a stray file was put in {LOG_DIR}/; {REPAIR_HINT}"
                )
            expected += 1
        expected = sequence + 1
    return expected - head - 1


def refuse_legacy_layout(storage: Storage) -> None:
    """A root of the original layout has a description.parquet without our ``sequence``
    column and no log: refuse it (opening it as an empty dataset would overwrite its
    description) and say how to import it."""
    raw = storage.read(DESCRIPTION)
    if raw is None:
        return
    try:
        columns = set(pq.read_schema(io.BytesIO(raw)).names)
    except (pa.ArrowException, ValueError, OSError):
        return  # damaged: lost_log_evidence reports it
    if "sequence" not in columns and {"name", "timestamp", "is_major"} <= columns:
        raise LegacyLayoutError(
            f"{storage.uri} holds a dataset of the original layout ({DESCRIPTION} and revision "
            f"folders, no {LOG_DIR}/): import it into a new root with "
            "RevisionedDataset.import_legacy(src, root, spark=...) or "
            "'revisions import-legacy SRC ROOT'; it is never opened or written as it is"
        )


def lost_log_evidence(storage: Storage) -> str | None:
    """Why a root without log entries is a dataset that lost its log, or None (a new
    dataset, or a first commit in progress)."""
    raw = storage.read(DESCRIPTION)
    if raw is not None:
        try:
            listed: int | str = pq.read_metadata(io.BytesIO(raw)).num_rows
        except (pa.ArrowException, ValueError, OSError):
            listed = "an unknown number of"
        if listed != 0:
            return (
                f"{LOG_DIR}/ holds no log entry, but {DESCRIPTION} lists {listed} revisions: "
                f"the log was deleted or lost (restore {LOG_DIR}/ from a backup)"
            )
    folders = [n[:-1] for n in storage.list_names("") if n.endswith("/") and n[0] not in "_."]
    if not folders or storage.exists(LOG_MARKER):
        return None  # its writer made the marker before claiming any folder
    for folder in folders:
        try:
            claimed = storage.exists(f"{folder}/{CLAIM_FILE}")
        except PathEscapeError:
            continue
        if claimed:
            return (
                f"revision folder {folder!r} exists but {LOG_DIR}/ is missing: the log was "
                f"deleted or lost (restore {LOG_DIR}/ from a backup; if no revision was ever "
                "committed here, delete the folder)"
            )
    return None


def mark_dataset(storage: Storage) -> None:
    """Written before the first revision folder is claimed (see ``layout``); idempotent."""
    storage.create_exclusive(LOG_MARKER, b'{"format":1}')
