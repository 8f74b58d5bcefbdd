"""The job's side of a run: its slice, its inputs, its one commit, and the report to Dagster."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dagster_pipes import (
    DagsterPipesError,
    PipesContext,
    PipesContextLoader,
    PipesEnvVarParamsLoader,
    PipesMessageWriter,
    PipesParamsLoader,
    open_dagster_pipes,
)
from pyspark.sql import DataFrame, SparkSession

from ..core.dataset import RevisionedDataset
from ..core.errors import ArgumentTypeError, RevisionsError
from ..core.log.records import Revision
from ..core.runs.commit import (
    CommittedRun,
    commit_run,
    compaction_following,
    entity_count,
    run_revisions,
)
from ..core.runs.consume import (
    ScoringInputs,
    TableChanges,
    changes_since,
    plan_inputs,
    with_tombstones,
)
from ..core.runs.run_slice import SLICE_EXTRA, RunSlice, RunSliceError
from ..core.uris import describe
from .by_hand import slice_by_hand

log = logging.getLogger("revisions_assets.pipes")


class JobCommitError(RevisionsError):
    """A job's commit that cannot be made: a second commit of one run, or rows for another
    table than the run's."""


@dataclass(frozen=True)
class Window:
    """A featurized run's compute window ``[start, end)``; its sources are read from
    ``source_start`` (``start - lookback``)."""

    start: datetime
    end: datetime
    lookback: timedelta = timedelta(0)

    @property
    def source_start(self) -> datetime:
        return self.start - self.lookback


class RevisionJobContext:
    """One run's revision, computed where this job's Spark runs: the slice Dagster resolved
    (or one resolved by hand), what the job reads, and its one commit, reported to Dagster."""

    def __init__(
        self,
        run: RunSlice,
        pipes: PipesContext | None = None,
        storage_options: Mapping[str, object] | None = None,
    ):
        self.run = run
        self.pipes = pipes
        self._storage_options = dict(storage_options or {})
        self._inputs: ScoringInputs | None = None
        self._done: CommittedRun | None = None

    def __repr__(self) -> str:
        kind = "major" if self.run.is_major else "minor"
        name = self.run.asset_key or self.run.table
        return f"RevisionJobContext({name!r}, {kind}: {self.run.reason})"

    # -- the slice ---------------------------------------------------------------------------

    @property
    def is_major(self) -> bool:
        return self.run.is_major

    @property
    def reason(self) -> str:
        return self.run.reason

    @property
    def window(self) -> Window:
        """A featurized run's compute window (a scoring run has none: it reads changes)."""
        if self.run.compute_start is None or self.run.compute_end is None:
            raise RunSliceError(
                f"{self.run.asset_key or self.run.table}: a scoring run has no window; read "
                "its inputs with job.scoring_inputs(spark)"
            )
        return Window(self.run.compute_start, self.run.compute_end, self.run.lookback)

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self.run.partition_keys

    @property
    def run_id(self) -> str:
        """The Dagster run (empty when the job runs by hand)."""
        return self.run.run_id

    @property
    def extras(self) -> Mapping[str, Any]:
        """The Pipes extras the asset's function passed beside the slice (empty by hand)."""
        return self.pipes.extras if self.pipes is not None else {}

    @property
    def log(self) -> logging.Logger:
        """A logger whose messages reach the Dagster run's log (a plain one by hand)."""
        return self.pipes.log if self.pipes is not None else log

    @property
    def committed(self) -> bool:
        return self._done is not None

    @staticmethod
    def spark(**conf: str) -> SparkSession:
        """The job's Spark session (``SparkSession.builder.getOrCreate()``, with ``conf``),
        its console progress bars off: a Pipes client forwards the job's output to the
        Dagster run's (and ``dg launch``'s), where they would interleave with the logs. On a
        cluster that started the session already, that session, as it is."""
        builder = SparkSession.builder.config("spark.ui.showConsoleProgress", "false")
        for key, value in conf.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()

    def dataset(self, spark: SparkSession) -> RevisionedDataset:
        """The run's dataset, to read and commit its table."""
        return RevisionedDataset(
            self.run.root,
            spark,
            {self.run.table: list(self.run.id_columns)},
            compact_after=self.run.compact_after,
            storage_options=self._storage_options,
        )

    # -- inputs (scoring) --------------------------------------------------------------------

    def upstream_changes(self, spark: SparkSession) -> dict[str, TableChanges]:
        """Each input's changes after the position this consumer committed, up to the head
        the run is pinned to (only the entities whose values changed; for the main input,
        only changes of the columns it uses)."""
        out = {}
        for u in self.run.upstream:
            snapshot = RevisionedDataset(
                u.root, spark, read_only=True, storage_options=self._storage_options
            ).snapshot()
            compared = self.run.uses_columns if u.kind == "main" else None
            changes = changes_since(snapshot, u.table, u.since, u.head, compared)
            self.log.info(
                f"{u.asset_key or u.table}: changes since sequence {u.since} up to {u.head}"
                f"{' (reset)' if changes.is_reset else ''}"
            )
            out[u.name] = TableChanges(changes, snapshot, u.table, u.id_columns, u.head)
        return out

    def scoring_inputs(self, spark: SparkSession) -> ScoringInputs:
        """What a scoring function gets, as a ``scoring_asset`` run in Dagster gets it: the
        main rows to (re)score and the reference rows they join to. ``commit`` then adds a
        tombstone per main entity deleted upstream."""
        main = self.run.main
        if main is None:
            raise RunSliceError(f"{self.run.asset_key or self.run.table}: not a scoring run")
        changes = self.upstream_changes(spark)
        self._inputs = plan_inputs(
            self.run.is_major,
            self.run.soft,
            changes[main.name],
            {u.name: (changes[u.name], u.on) for u in self.run.upstream if u.kind != "main"},
        )
        return self._inputs

    # -- the commit --------------------------------------------------------------------------

    def commit(
        self,
        rows: DataFrame | Mapping[str, DataFrame],
        metadata: Mapping[str, Any] | None = None,
    ) -> Revision | None:
        """Commit the run's revision of its table (``{table: rows}`` or the rows alone) at the
        slice's positions, exactly once, and report it to Dagster. ``metadata``: more
        entries for the materialization. Returns the revision (None: no rows, nothing
        committed). A job retried within one Dagster run finds its earlier commit in the
        log and reports that one instead of committing again."""
        if self._done is not None:
            raise JobCommitError(
                f"{self.run.asset_key or self.run.table}: job.commit() was already called: a "
                "run commits one revision"
            )
        frame = self._rows(rows)
        ds = self.dataset(frame.sparkSession)
        shown = dict(metadata or {})
        log = ds.snapshot()
        earlier = run_revisions(log.revisions(), self.run)
        if earlier:
            rev = earlier[-1]
            self.log.info(
                f"revision {rev.name} (sequence {rev.sequence}) of run {self.run_id} is already "
                "committed (an earlier attempt): reporting it"
            )
            compaction = compaction_following(log.revisions(), self.run.table, rev)
            done = CommittedRun(rev, compaction, entity_count(log, self.run, rev), log)
        else:
            if self.run.upstream:
                tombstones = self._inputs.tombstones if self._inputs else None
                frame = with_tombstones(frame, tombstones)
                if self.run.soft and self._inputs is not None:
                    shown["rescored_entities"] = self._inputs.main.count()
            done = commit_run(ds, self.run, frame)
        self._done = done
        self._report(done, shown)
        return done.revision

    def _rows(self, rows: DataFrame | Mapping[str, DataFrame]) -> DataFrame:
        if isinstance(rows, DataFrame):
            return rows
        if isinstance(rows, Mapping):
            other = sorted(set(rows) - {self.run.table})
            if other or self.run.table not in rows:
                raise JobCommitError(
                    f"{self.run.asset_key or self.run.table}: this run commits table "
                    f"{self.run.table!r}, got tables {sorted(rows)}"
                )
            return self._rows(rows[self.run.table])
        raise ArgumentTypeError(
            f"job.commit takes a Spark DataFrame or {{table: DataFrame}}, got {describe(rows)}"
        )

    def _report(self, done: CommittedRun, metadata: Mapping[str, Any]) -> None:
        """The materialization for Dagster: the revision's sequence (Dagster reads the rest
        from the log), the table's live entities, the compaction, the job's own entries."""
        rev = done.revision
        if rev is None:
            self.log.info(f"{self.run.root}/{self.run.table}: no rows, nothing committed")
            report: dict[str, Any] = {"revision": "none: no rows, nothing committed"}
        else:
            self.log.info(
                f"committed {'major' if rev.is_major else 'minor'} revision {rev.name} "
                f"(sequence {rev.sequence}) to {self.run.root}/{self.run.table}"
            )
            report = {
                "revision": rev.name,
                "sequence": rev.sequence,
                "kind": "major" if rev.is_major else "minor",
                "data_version": f"{self.run.table}@{rev.sequence}",
            }
            if done.entities is not None:
                report["dagster/row_count"] = done.entities
        if done.compaction is not None:
            report["compaction_sequence"] = done.compaction.sequence
        if self.pipes is not None:
            self.pipes.report_asset_materialization(
                metadata={**metadata, **report}, data_version=report.get("data_version")
            )


@contextmanager
def open_revision_job(
    *,
    context_loader: PipesContextLoader | None = None,
    message_writer: PipesMessageWriter | None = None,
    params_loader: PipesParamsLoader | None = None,
    storage_options: Mapping[str, object] | None = None,
    **by_hand: Any,
) -> Iterator[RevisionJobContext]:
    """The run this job computes and commits.

    Launched by Dagster Pipes (a ``pipes=True`` asset): opens the Pipes context (the
    loaders and writer as ``dagster_pipes.open_dagster_pipes`` takes them, e.g. S3 ones on
    EMR) and reads the run's slice from its extras; an error raised inside the block is
    reported to the Dagster run. Run by hand (no Pipes context): the slice is resolved from
    the logs with the keyword arguments of ``slice_by_hand`` (``dataset_root``, ``table``,
    ``id_columns``, ``code_version``, ``window`` or ``upstream`` …). ``storage_options``:
    access to ``s3://`` roots (endpoint, credentials) when the environment does not give it.
    """
    loader = params_loader or PipesEnvVarParamsLoader()
    if not loader.is_dagster_pipes_process():
        if not by_hand:
            raise RunSliceError(
                "open_revision_job(): not launched by Dagster Pipes, and no slice given: run "
                "it from a pipes=True asset, or by hand with dataset_root=, table=, "
                "id_columns=, code_version= and window= (featurized) or upstream= (scoring)"
            )
        yield RevisionJobContext(
            slice_by_hand(storage_options=storage_options, **by_hand), None, storage_options
        )
        return
    if by_hand:
        raise RunSliceError(
            f"open_revision_job(): launched by Dagster Pipes, the slice comes from Dagster; "
            f"drop the arguments {sorted(by_hand)}"
        )
    with open_dagster_pipes(
        context_loader=context_loader, message_writer=message_writer, params_loader=loader
    ) as pipes:
        try:
            extra = pipes.get_extra(SLICE_EXTRA)
        except DagsterPipesError as exc:
            raise RunSliceError(
                f"launched by Dagster Pipes without the run's slice (extra {SLICE_EXTRA!r}): "
                "pass extras=job.extras to the Pipes client's run(...)"
            ) from exc
        yield RevisionJobContext(RunSlice.from_dict(extra), pipes, storage_options)
