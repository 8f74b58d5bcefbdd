"""A run's slice: what one materialization computes and how it commits, as plain data.

The one slice model of the project. The revision IO manager resolves it from a Dagster
run's context and the logs, a job run by hand from its arguments and the logs, both by the
rules of ``resolve.py``; asset bodies, ``load_input``, the commit and the materialization
read the same frozen object. With Dagster Pipes it travels to the remote job as a Pipes
extra (``to_dict``, ``from_dict``), and the job commits with the same ``commit_run``, so
both write the same log entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..dataset import DEFAULT_COMPACT_AFTER
from ..errors import RevisionsError
from ..log.records import UpstreamPosition
from ..timeutil import to_utc

#: the Pipes extra holding the slice (``RunSlice.to_dict``)
SLICE_EXTRA = "revisions_slice"
#: the version of ``to_dict``'s layout: a job refuses a slice of another version
SLICE_FORMAT = 1


class RunSliceError(RevisionsError, ValueError):
    """A slice that cannot be resolved or used (a window that contradicts the log, a
    malformed slice, or one of another version)."""


class UnknownInputError(RevisionsError, KeyError):
    """An input name that is not one of a scoring run's revisioned inputs."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class InputSlice:
    """One input of a scoring run: its changes after ``since`` up to the pinned ``head``."""

    name: str  # the input's name (the scoring function's argument)
    asset_key: str
    root: str
    table: str
    id_columns: tuple[str, ...]
    kind: str  # "main" or "reference"
    since: int  # the position the consumer recorded (0: never consumed)
    head: int  # the upstream log head the run is pinned to
    data_version: str = ""  # the table's data version at head: "<table>@<sequence>"
    #: a reference's join: {main column: reference column}
    on: Mapping[str, str] = field(default_factory=dict)

    @property
    def position(self) -> UpstreamPosition:
        """The position the run's revision records: the pinned head."""
        return UpstreamPosition(self.root, self.table, self.head)


@dataclass(frozen=True)
class RunSlice:
    """What one run computes and commits: the window, major or minor and why, the upstream
    positions and heads, and the log head the run started from.

    Revision timestamp: the *end* of the run's window (exclusive, e.g. partition
    2013-01-05 -> 2013-01-06T00:00Z): the data of a day is complete at the end of that day,
    so "state as of T" includes a partition exactly when the whole day is before T."""

    asset_key: str
    root: str
    table: str
    id_columns: tuple[str, ...]
    code_version: str | None
    is_major: bool
    reason: str
    timestamp: datetime  # the revision's logical time
    run_id: str = ""  # the Dagster run (empty: a job run by hand)
    partition: str = ""  # the run's partitions as the revision records them: ``A`` or ``A...B``
    partition_keys: tuple[str, ...] = ()
    compute_start: datetime | None = None  # featurized: the compute window [start, end)
    compute_end: datetime | None = None
    lookback: timedelta = timedelta(0)  # featurized: how far before the window sources are read
    upstream: tuple[InputSlice, ...] = ()  # scoring: one per input
    soft: bool = False  # scoring: a major only because an input was reset
    field_versions: Mapping[str, str] = field(default_factory=dict)
    uses_columns: tuple[str, ...] | None = None  # scoring: the main input's columns that count
    columns: Mapping[str, str] | None = None  # declared output {column: Spark type}
    force_compaction: bool = False
    compact_after: int | None = DEFAULT_COMPACT_AFTER
    expected_head: int = 0  # the dataset's log head when the slice was resolved
    skip: str | None = None  # scoring: why there is nothing to consume (no revision, no run)

    @property
    def producer(self) -> dict[str, str]:
        return {"asset_key": self.asset_key, "run_id": self.run_id, "partition_key": self.partition}

    @property
    def upstream_positions(self) -> tuple[UpstreamPosition, ...]:
        return tuple(u.position for u in self.upstream)

    @property
    def expected_positions(self) -> dict[tuple[str, str], int]:
        """The commit's precondition: the positions this run started from."""
        return {(u.root, u.table): u.since for u in self.upstream}

    @property
    def main(self) -> InputSlice | None:
        return next((u for u in self.upstream if u.kind == "main"), None)

    def input(self, name: str) -> InputSlice:
        """The input named ``name`` (the scoring function's argument)."""
        for u in self.upstream:
            if u.name == name:
                return u
        known = [u.name for u in self.upstream]
        raise UnknownInputError(f"{self.asset_key} has no revisioned input {name!r}: {known}")

    def output_field_versions(self, columns: Sequence[str]) -> dict[str, str] | None:
        """Every value column's version (declared, else the code version), when the asset
        declares field versions."""
        if not self.field_versions:
            return None
        values = [c for c in columns if c not in self.id_columns and c != "_deleted"]
        versions = {c: self.field_versions.get(c, self.code_version) for c in values}
        return {c: v for c, v in versions.items() if v is not None}

    # -- the Pipes extra -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The slice as JSON values (a Pipes extra)."""
        return {
            "format": SLICE_FORMAT,
            "asset_key": self.asset_key,
            "root": self.root,
            "table": self.table,
            "id_columns": list(self.id_columns),
            "code_version": self.code_version,
            "is_major": self.is_major,
            "reason": self.reason,
            "timestamp": self.timestamp.isoformat(),
            "run_id": self.run_id,
            "partition": self.partition,
            "partition_keys": list(self.partition_keys),
            "window_start": _iso(self.compute_start),
            "window_end": _iso(self.compute_end),
            "lookback_seconds": self.lookback.total_seconds(),
            "upstream": [
                {
                    "name": u.name,
                    "asset_key": u.asset_key,
                    "root": u.root,
                    "table": u.table,
                    "id_columns": list(u.id_columns),
                    "kind": u.kind,
                    "since": u.since,
                    "head": u.head,
                    "data_version": u.data_version,
                    "on": dict(u.on),
                }
                for u in self.upstream
            ],
            "soft": self.soft,
            "field_versions": dict(self.field_versions),
            "uses_columns": list(self.uses_columns) if self.uses_columns is not None else None,
            "columns": dict(self.columns) if self.columns is not None else None,
            "force_compaction": self.force_compaction,
            "compact_after": self.compact_after,
            "expected_head": self.expected_head,
            "skip": self.skip,
        }

    @classmethod
    def from_dict(cls, doc: Any) -> RunSlice:
        """The slice ``to_dict`` wrote; RunSliceError when ``doc`` is not one of this version."""
        if not isinstance(doc, Mapping):
            raise RunSliceError(f"a run's slice is a JSON object, got {type(doc).__name__}")
        if doc.get("format") != SLICE_FORMAT:
            raise RunSliceError(
                f"the run's slice has format {doc.get('format')!r}, this revisions-assets reads "
                f"format {SLICE_FORMAT}: install the same revisions-assets version in the job's "
                "environment as in Dagster's"
            )
        try:
            uses = doc["uses_columns"]
            return cls(
                asset_key=str(doc["asset_key"]),
                root=str(doc["root"]),
                table=str(doc["table"]),
                id_columns=tuple(doc["id_columns"]),
                code_version=doc["code_version"],
                is_major=bool(doc["is_major"]),
                reason=str(doc["reason"]),
                timestamp=to_utc(doc["timestamp"], "slice timestamp"),
                run_id=str(doc["run_id"]),
                partition=str(doc["partition"]),
                partition_keys=tuple(doc["partition_keys"]),
                compute_start=_time(doc["window_start"]),
                compute_end=_time(doc["window_end"]),
                lookback=timedelta(seconds=float(doc["lookback_seconds"])),
                upstream=tuple(
                    InputSlice(
                        name=str(u["name"]),
                        asset_key=str(u["asset_key"]),
                        root=str(u["root"]),
                        table=str(u["table"]),
                        id_columns=tuple(u["id_columns"]),
                        kind=str(u["kind"]),
                        since=int(u["since"]),
                        head=int(u["head"]),
                        data_version=str(u["data_version"]),
                        on=dict(u["on"]),
                    )
                    for u in doc["upstream"]
                ),
                soft=bool(doc["soft"]),
                field_versions=dict(doc["field_versions"]),
                uses_columns=tuple(uses) if uses is not None else None,
                columns=dict(doc["columns"]) if doc["columns"] is not None else None,
                force_compaction=bool(doc["force_compaction"]),
                compact_after=doc["compact_after"],
                expected_head=int(doc["expected_head"]),
                skip=doc.get("skip"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RunSliceError(f"the run's slice is malformed: {exc!r}") from exc


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _time(value: str | None) -> datetime | None:
    return to_utc(value, "slice window") if value is not None else None
