"""A run's commit, wherever its Spark runs: the one way a ``RunSlice`` becomes a revision.

The revision IO manager (in process) and a remote job (``revisions_assets.pipes``) both call
``commit_run``: the same checks, the same ``RevisionedDataset.commit`` arguments, the same
compaction afterwards, so the log cannot tell them apart. ``run_revisions`` finds what a
run committed, by its run id, in a log read afterwards (a job whose report was lost).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from ..columns import DELETED
from ..dataset import RevisionedDataset
from ..errors import RevisionsError
from ..log.records import COMPACTION, Revision
from ..read.scan import DatasetSnapshot
from .run_slice import RunSlice


class DeclaredColumnsError(RevisionsError, ValueError):
    """An asset returned other columns (or types) than its definition declares."""


@dataclass(frozen=True)
class CommittedRun:
    """What a run's commit did: its revision (None: no rows, nothing committed), the
    compaction that followed it, the live entities of the table afterwards, and the snapshot
    of the log taken after it (the run's from then on; None: the commit was found in a log
    read by the caller)."""

    revision: Revision | None
    compaction: Revision | None
    entities: int | None  # None when nothing was committed
    snapshot: DatasetSnapshot | None = None


def check_columns(asset_key: str, declared: Mapping[str, str], schema: StructType) -> None:
    """The output of an asset that declares ``{column: Spark type}`` has exactly those."""
    got = {f.name: f.dataType.simpleString() for f in schema.fields if f.name != DELETED}
    missing = [c for c in declared if c not in got]
    extra = [c for c in got if c not in declared]
    retyped = [
        f"{c} {declared[c]} -> {got[c]}" for c in declared if c in got and declared[c] != got[c]
    ]
    if missing or extra or retyped:
        found = [
            f"{what}: {', '.join(names)}"
            for what, names in (
                ("missing", missing),
                ("not declared", extra),
                ("types declared -> returned", retyped),
            )
            if names
        ]
        raise DeclaredColumnsError(
            f"asset {asset_key} returned other columns than it declares ({'; '.join(found)}): "
            "change the function or the asset's columns"
        )


def commit_run(ds: RevisionedDataset, s: RunSlice, rows: DataFrame) -> CommittedRun:
    """Commit ``rows`` as the run's revision of ``s.table``, then compact as the policy (or
    the run) asks. Only the rows whose values changed are written (``skip_unchanged``); a
    soft major's rows are its re-scored entities and tombstones, written as they are, and
    every other score is kept (``carry``): comparing them with every score would cost what
    re-scoring everything costs."""
    if s.columns is not None:
        check_columns(s.asset_key, s.columns, rows.schema)
    rev = ds.commit(
        {s.table: rows},
        timestamp=s.timestamp,
        is_major=s.is_major,
        version=s.code_version,
        producer=s.producer,
        upstream=s.upstream_positions,
        expected_positions=s.expected_positions,
        properties={"reason": s.reason},
        skip_unchanged=not s.soft,
        carry=s.soft,
        field_versions=(
            {s.table: versions}
            if (versions := s.output_field_versions(rows.columns)) is not None
            else None
        ),
    )
    compaction = compaction_after(ds, s)
    after = ds.snapshot()  # the run's one snapshot of its log after the commit
    entities = entity_count(after, s, rev) if rev is not None else None
    return CommittedRun(rev, compaction, entities, after)


def compaction_after(ds: RevisionedDataset, s: RunSlice) -> Revision | None:
    """The compaction of the slice's table after the run's commit: the one the dataset's
    ``compact_after`` policy made, or, when the run forces one,
    ``ds.maintenance.compact(table)``."""
    done = [c for c in ds.maintenance.last_compactions if s.table in c.tables]
    if not done and s.force_compaction and s.table in ds.tables():
        done = [c for c in [ds.maintenance.compact(s.table)] if c is not None]
    return done[-1] if done else None


def entity_count(snapshot: DatasetSnapshot, s: RunSlice, rev: Revision) -> int:
    """The live entities of the table once ``rev`` is committed: a complete major's own
    count, else a count of the state on ``snapshot``, a snapshot taken after the commit
    (one Spark job, on the id columns only)."""
    written = rev.tables[s.table]
    if rev.is_major and not written.carries:
        return written.rows - written.tombstones
    return snapshot.scan(s.table).count()


def run_revisions(records: Sequence[Revision], s: RunSlice) -> list[Revision]:
    """The revisions of ``s.table`` that the slice's run committed (its producer's run id
    and asset key), after the log head it started from: what a run looks for when its
    job's report is lost, and what a job retried within one run finds before committing
    again."""
    return [
        r
        for r in records
        if r.sequence > s.expected_head
        and r.wrote(s.table)
        and s.run_id
        and r.producer.get("run_id") == s.run_id
        and r.producer.get("asset_key") == s.asset_key
    ]


def compaction_following(records: Sequence[Revision], table: str, rev: Revision) -> Revision | None:
    """The compaction of ``table`` committed right after ``rev`` (before any other revision
    of the table): the one its run's commit led to, found in the log."""
    for r in records:
        if r.sequence <= rev.sequence:
            continue
        if r.kind == COMPACTION and table in r.tables:
            return r
        if r.wrote(table):
            return None
    return None
