"""Featurized and scoring assets whose Spark runs elsewhere, launched with Dagster Pipes.

With ``pipes=True``, ``featurized_asset`` and ``scoring_asset`` decorate a function that
launches a remote job (EMR, EMR Serverless, Databricks, Dataproc, a subprocess) with any
Pipes client: ``fn(context, job, **clients)``, where ``job`` is a ``RevisionJob`` and the
other parameters name the resources it launches with. It returns what the client's
``run(...)`` returns. The remote side is ``revisions_assets.pipes`` (``open_revision_job``).

- **Before the launch** the run's slice is resolved exactly as for an in-process run (the
  revision IO manager: window, major or minor and why, pinned upstream heads, consumer
  positions, the log head), reading logs only (no JVM here), and handed to the job in
  ``job.extras``. A scoring run with nothing to consume launches nothing.
- **After the launch** the log is the truth, read afresh:

  - the job reported a revision that is in the log: it is materialized with the same
    metadata, data version and checks as an in-process run (``RevisionsIOManager.
    materialization``);
  - the job committed but its report was lost (it died after its commit, a message was
    dropped): its revision is found in the log by the run's id and reported, once; the run
    succeeds and says so (``remote_report``, and ``remote_error`` when the job failed);
  - the job failed and the log has no revision of this run: the run fails with the job's
    error (nothing was committed).
"""

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from revisions_assets.core.errors import ArgumentTypeError, RevisionsError
from revisions_assets.core.log.records import Revision
from revisions_assets.core.runs.commit import CommittedRun, compaction_following, run_revisions
from revisions_assets.core.runs.run_slice import SLICE_EXTRA, RunSlice
from revisions_assets.core.uris import describe

from .factory import RevisionRunConfig, asset_decorator, io_manager
from .resources import RevisionsIOManager
from .unmaterialized import scoring_slice_or_none

#: what a remote job reports beside the revision metadata the run derives from the log
#: (``revisions_assets.pipes``): the revision's sequence (absent: it committed nothing), the
#: table's live entities, the compaction its commit led to
REPORT_SEQUENCE = "sequence"
REPORT_ROW_COUNT = "dagster/row_count"
REPORT_COMPACTION = "compaction_sequence"
#: keys of the job's report that the run derives from the log itself
_DERIVED = {"revision", "kind", "data_version", REPORT_SEQUENCE, REPORT_COMPACTION}

#: materialization metadata: how the run learned of the revision
REMOTE_REPORT = "remote_report"
REMOTE_ERROR = "remote_error"

Launcher = Callable[..., Any]


class RemoteJobError(RevisionsError):
    """A remote job ended without a revision the log can confirm (no report and nothing
    committed, or a report the log contradicts)."""


class RemoteOutcomeError(ArgumentTypeError):
    """The function of a ``pipes=True`` asset returned something other than what a Pipes
    client's ``run(...)`` returns."""


@dataclass(frozen=True)
class RevisionJob:
    """What the function of a ``pipes=True`` asset launches: the run's slice, resolved before
    the launch exactly as for an in-process run, and ``extras`` that carry it to the job."""

    #: the slice as the revision IO manager resolved it (window, major or minor and why…):
    #: what the job computes and commits with
    run: RunSlice

    @property
    def extras(self) -> dict[str, Any]:
        """The Pipes extras to hand the client's ``run(extras=...)``: the slice; merge your
        own in (``{**job.extras, "my_key": ...}``)."""
        return {SLICE_EXTRA: self.run.to_dict()}

    @property
    def is_major(self) -> bool:
        return self.run.is_major

    @property
    def reason(self) -> str:
        return self.run.reason


def launcher_resources(fn: Launcher, asset: str) -> tuple[str, ...]:
    """The resource keys a launcher takes: its parameters after ``(context, job)``."""
    params = list(inspect.signature(fn).parameters.values())
    if len(params) < 2 or any(
        p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params
    ):
        raise ArgumentTypeError(
            f"{asset}: the function of a pipes=True asset is fn(context, job, **clients), where "
            "the parameters after job name the resources it launches with (a Pipes client); "
            f"got {fn.__name__}{inspect.signature(fn)}"
        )
    return tuple(p.name for p in params[2:])


def remote_asset(
    kwargs: Mapping[str, Any],
    fn: Launcher,
    io_manager_key: str,
    *,
    scoring: bool = False,
    describe_output: Callable[[RevisionsIOManager, RunSlice], Mapping[str, Any]] | None = None,
) -> dg.AssetsDefinition:
    """The asset of a ``pipes=True`` factory (``kwargs``: its ``dg.asset`` arguments): its
    body resolves the run's slice and launches the job with ``fn`` (``launch``). A scoring
    asset's run with nothing to consume, or refused, launches nothing and materializes
    nothing (``unmaterialized.py``). ``describe_output(io, slice)``: more metadata of the
    materialization, read from the run's snapshots of the logs after the job."""
    clients = launcher_resources(fn, kwargs["name"])
    kwargs = {**kwargs, "required_resource_keys": set(clients)}

    def launched(context: dg.AssetExecutionContext, io: RevisionsIOManager, s: RunSlice) -> Any:
        described = (lambda: describe_output(io, s)) if describe_output is not None else None
        return launch(context, io, fn, RevisionJob(s), clients, described)

    if not scoring:

        @asset_decorator(**kwargs)
        def _remote(
            context: dg.AssetExecutionContext, config: RevisionRunConfig
        ) -> dg.MaterializeResult:
            io = io_manager(context, io_manager_key)
            return launched(context, io, io.slice_for(context))

        return _remote

    # a run with nothing to consume materializes nothing (no day looks scored twice)
    @asset_decorator(output_required=False, **kwargs)
    def _remote_scoring(
        context: dg.AssetExecutionContext, config: RevisionRunConfig
    ) -> Iterator[dg.MaterializeResult]:
        io = io_manager(context, io_manager_key)
        s = scoring_slice_or_none(context, io)
        if s is not None:
            yield launched(context, io, s)

    return _remote_scoring


def launch(
    context: dg.AssetExecutionContext,
    io: RevisionsIOManager,
    fn: Launcher,
    job: RevisionJob,
    resources: Iterable[str],
    describe_output: Callable[[], Mapping[str, Any]] | None = None,
) -> dg.MaterializeResult:
    """Launch the job with ``fn`` and materialize what the log says it committed.

    ``describe_output()``: more metadata of the materialization, read from the logs after
    the job (a scoring asset's column lineage)."""
    s = job.run
    context.log.info(
        f"{s.asset_key}: launching the remote job: {'major' if s.is_major else 'minor'} "
        f"({s.reason}), log head {s.expected_head}"
    )
    try:
        outcome = fn(context, job, **{k: getattr(context.resources, k) for k in resources})
        error: Exception | None = None
    except Exception as exc:  # the job may have committed before it failed: the log says
        outcome, error = None, exc
    report, checks, launched = _reported(outcome, context.asset_key)
    records = io.snapshot(s.run_id, s.root, refresh=True).revisions()  # the log after the job
    done, shown = _confirmed(context, job, records, report, error)
    extra = dict(describe_output()) if describe_output and done.revision else {}
    result = io.materialization(context, done, {**launched, **shown, **extra})
    if not checks:
        return result
    return dg.MaterializeResult(
        metadata=result.metadata, data_version=result.data_version, check_results=checks
    )


def _confirmed(
    context: dg.AssetExecutionContext,
    job: RevisionJob,
    records: Sequence[Revision],
    report: dg.MaterializeResult | None,
    error: Exception | None,
) -> tuple[CommittedRun, dict[str, Any]]:
    """The run's commit as the log confirms it, and the metadata the job reported."""
    run = job.run
    mine = run_revisions(records, run)
    where = f"{run.root} (table {run.table!r})"
    if report is None:
        if not mine:
            if error is not None:  # nothing committed: the run fails with the job's error
                raise RemoteJobError(
                    f"{run.asset_key}: the remote job failed and committed nothing (the log of "
                    f"{where} has no revision of run {run.run_id}): {error}"
                ) from error
            raise RemoteJobError(
                f"{run.asset_key}: the remote job ended without reporting a revision, and the "
                f"log of {where} has none of run {run.run_id}: does the job call "
                "job.commit(...) inside open_revision_job()?"
            )
        rev = mine[-1]
        how = "lost: found in the log by the run's id"
        context.log.warning(
            f"{run.asset_key}: the remote job's report was lost"
            + (f" (the job failed after its commit: {error})" if error is not None else "")
            + f"; revision {rev.name} (sequence {rev.sequence}) of this run is in the log of "
            f"{where}: reported from the log"
        )
        shown: dict[str, Any] = {REMOTE_REPORT: how}
        if error is not None:
            shown[REMOTE_ERROR] = f"{type(error).__name__}: {error}"[:2000]
        return CommittedRun(rev, compaction_following(records, run.table, rev), None), shown
    values = {k: getattr(v, "value", v) for k, v in (report.metadata or {}).items()}
    passed = {k: v for k, v in (report.metadata or {}).items() if k not in _DERIVED}
    passed.pop(REPORT_ROW_COUNT, None)
    shown = {**passed, REMOTE_REPORT: "reported by the job"}
    sequence = values.get(REPORT_SEQUENCE)
    if sequence is None:  # the job had no rows to write
        if mine:
            raise RemoteJobError(
                f"{run.asset_key}: the remote job reported that it committed nothing, but the "
                f"log of {where} has revision {mine[-1].name} (sequence {mine[-1].sequence}) "
                f"of run {run.run_id}"
            )
        compaction = _compaction(records, values.get(REPORT_COMPACTION), where)
        return CommittedRun(None, compaction, None), shown
    rev = next((r for r in mine if r.sequence == sequence), None)
    if rev is None:
        raise RemoteJobError(
            f"{run.asset_key}: the remote job reported revision sequence {sequence}, but the "
            f"log of {where} has no revision of run {run.run_id} there"
            + (f" (it has {[r.sequence for r in mine]})" if mine else "")
            + ": did the job commit to another dataset root?"
        )
    compaction = _compaction(records, values.get(REPORT_COMPACTION), where)
    return CommittedRun(rev, compaction, values.get(REPORT_ROW_COUNT)), shown


def _compaction(records: Sequence[Revision], sequence: Any, where: str) -> Revision | None:
    """The compaction the job reported (by its sequence), as the log has it."""
    if sequence is None:
        return None
    found = next((r for r in records if r.sequence == sequence), None)
    if found is None:
        raise RemoteJobError(
            f"the remote job reported compaction sequence {sequence} of {where}: not in its log"
        )
    return found


def _reported(
    outcome: Any, key: dg.AssetKey
) -> tuple[dg.MaterializeResult | None, list[dg.AssetCheckResult], dict[str, Any]]:
    """What the job reported for ``key`` (None: no report), its check results, and the
    launch's own metadata (e.g. the remote job's id), from what the client's run returned."""
    launched: dict[str, Any] = {}
    if outcome is None:
        results: list[Any] = []
    elif isinstance(outcome, dg.PipesClientCompletedInvocation):
        results = list(outcome.get_results(implicit_materializations=False))
        launched = dict(outcome.metadata)
    elif isinstance(outcome, dg.MaterializeResult):
        results = [outcome]
    elif isinstance(outcome, Iterable) and not isinstance(outcome, str | bytes | Mapping):
        results = list(outcome)
    else:
        raise RemoteOutcomeError(
            "the function of a pipes=True asset returns what its Pipes client's run(...) "
            f"returns (a PipesClientCompletedInvocation), got {describe(outcome)}"
        )
    mats = [
        r
        for r in results
        if isinstance(r, dg.MaterializeResult)
        and r.asset_key in (None, key)
        and "revision" in (r.metadata or {})  # the report of revisions_assets.pipes
    ]
    checks = [r for r in results if isinstance(r, dg.AssetCheckResult)]
    return (mats[-1] if mats else None), checks, launched
