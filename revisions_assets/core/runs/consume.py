"""What a scoring run reads and re-scores, wherever its Spark runs (docs/concepts/consumers.md).

Each input is read as its changes since the consumer's recorded position, pinned to a head
(``changes_since``), on the run's one snapshot of the input's log; ``plan_inputs`` selects
the main entities to (re)score and the reference rows they join to; ``with_tombstones`` adds
a tombstone per main entity deleted upstream.
The Dagster scoring assets (``revisions_assets.dagster.scoring``) and a remote scoring job
(``revisions_assets.pipes``) both plan with these, so both score the same rows.

Reference inputs (reverse join): a changed reference row re-scores exactly the main
entities that join to it. Only the reference rows those entities need are read (a semi-join
against a broadcast of their keys: a filtered join planned by Spark, nothing is collected).

Soft majors: a major due only to an upstream reset re-scores only the upstream's
``ChangeSet.changed`` (and the entities joined to changed reference rows); the run commits
it as a carrying major (``carry=True``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..columns import DELETED
from ..dataset import RevisionedDataset
from ..read.results import ChangeSet
from ..read.scan import DatasetSnapshot


@dataclass(frozen=True)
class TableChanges:
    """One input table as a consumer sees it: the changes since its position, pinned."""

    changes: ChangeSet
    #: the run's snapshot of the input's log, the one its changes were read on
    snapshot: DatasetSnapshot
    table: str
    id_columns: tuple[str, ...]
    head: int  # the pinned upstream head

    @property
    def dataset(self) -> RevisionedDataset:
        """The input's dataset handle."""
        return self.snapshot.dataset  # type: ignore[return-value]

    @property
    def df(self) -> DataFrame:
        """The changed entities at the pinned head, with ``_deleted`` (all of them on a reset)."""
        return self.changes.df

    @cached_property
    def changed(self) -> DataFrame:
        """The entities whose values changed since the consumer's position, with
        ``_deleted``: the change set, or on a reset its soft-major ``changed``.

        A soft major's ``changed`` (after a carrying upstream major: that major's own rows;
        else a join of two whole states) is read several times by a
        scoring run (the rows to score, the tombstones, the count it reports): it is
        computed once and kept by the executors (``localCheckpoint``)."""
        changed = self.changes.changed if self.changes.is_reset else None
        return changed.localCheckpoint() if changed is not None else self.changes.df

    def state(self) -> DataFrame:
        """The table's full state at the pinned head (for majors and reverse joins)."""
        return self.snapshot.scan(self.table, at=self.head).to_spark()


def changes_since(
    snapshot: DatasetSnapshot,
    table: str,
    since: int,
    head: int,
    compared_columns: Sequence[str] | None,
) -> ChangeSet:
    """An input's changes after the consumer's position up to the pinned head, only the
    entities whose values (of ``compared_columns``, default all) changed, every column
    returned, read on ``snapshot``."""
    return (
        snapshot.scan(table)
        .changes(
            since_sequence=since,
            until_sequence=head,
            only_changed=True,
            compared_columns=compared_columns,
        )
        .to_changes()
    )


@dataclass(frozen=True)
class ScoringInputs:
    """What a scoring function sees: the main rows to score and the reference rows they need."""

    main: DataFrame
    references: dict[str, DataFrame]
    tombstones: DataFrame | None  # ids of deleted main entities (minor, soft major)


def plan_inputs(
    is_major: bool,
    soft: bool,
    main: TableChanges,
    references: Mapping[str, tuple[TableChanges, Mapping[str, str]]],
) -> ScoringInputs:
    """Select the main entities to (re)score and the reference rows they join to."""
    ids = list(main.id_columns)
    if is_major and not soft:
        rows = main.df.drop(DELETED) if main.changes.is_reset else main.state()
        tombstones = None
    else:
        # the change set (a soft major: its changed rows) holds the state at the pinned head
        rows = main.changed.filter(~F.col(DELETED)).drop(DELETED)
        tombstones = main.changed.filter(F.col(DELETED)).select(*ids)
        changed = [(ref, on) for ref, on in references.values() if ref.changes.revisions]
        if changed:
            # reverse join: main entities whose join keys match a changed reference row
            state = main.state()
            joined = reduce(
                DataFrame.unionByName,
                [
                    state.join(
                        F.broadcast(
                            ref.changed.select(
                                *[F.col(r).alias(m) for m, r in on.items()]
                            ).distinct()
                        ),
                        list(on),
                        "left_semi",
                    )
                    for ref, on in changed
                ],
            ).dropDuplicates(ids)
            rows = rows.unionByName(joined.join(rows.select(*ids), ids, "left_anti"))
    needed = {}
    for name, (ref, on) in references.items():
        keys = rows.select(*[F.col(m).alias(r) for m, r in on.items()]).distinct()
        ref_rows = ref.df.drop(DELETED) if ref.changes.is_reset else ref.state()
        needed[name] = ref_rows.join(F.broadcast(keys), list(on.values()), "left_semi")
    return ScoringInputs(rows, needed, tombstones)


def with_tombstones(scores: DataFrame, tombstones: DataFrame | None) -> DataFrame:
    """Scores flagged as live, plus a tombstone per deleted main entity."""
    if DELETED not in scores.columns:
        scores = scores.withColumn(DELETED, F.lit(False))
    if tombstones is None:
        return scores
    return scores.unionByName(tombstones.withColumn(DELETED, F.lit(True)), allowMissingColumns=True)
