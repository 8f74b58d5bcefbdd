"""A scoring run that materializes nothing: nothing to consume, or refused.

A scoring run commits nothing when its upstream has nothing new for it (its slice's
``skip``), and is refused when it asks for other partitions than its upstream changes cover
(``ScoringRangeError``, decided from the logs before Spark starts: the message names the
range to launch). Neither is a failure of the data, so neither may look like one:

- the step succeeds without output (the assets are ``output_required=False``): Dagster then
  marks none of the run's partitions failed (a partition is failed when its latest planned
  materialization belongs to a failed run), and every partition keeps its last
  materialization;
- a refused run says so on the run: an ERROR in its log with the range to launch, and the
  run tag ``revisions/refused`` holding that range (shown on the Runs page);
- the checks planned with the run keep their last results. Dagster plans a run's checks
  when it creates the run; one the run does not execute would show as skipped (or, in a
  failed run, "execution failed") instead of its last result. So the step reports, for
  each check of the asset in the run and each of its partitions, the check's last
  evaluation as it was (its outcome, severity, metadata and the materialization it
  checked), with ``kept_from_run`` naming the run that evaluated it.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

# the check execution records (the instance's event log storage has no public reader of them)
from dagster._core.event_api import PartitionKeyFilter
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionRecordStatus,
)

from revisions_assets.core.runs.run_slice import RunSlice

from .resources.io_manager import RevisionsIOManager
from .resources.slice import ScoringRangeError

#: run tag of a refused scoring run: the partitions to materialize instead
TAG_REFUSED = "revisions/refused"
#: metadata of a check result a run kept: the run that evaluated it
KEPT_FROM_RUN = "kept_from_run"
_EVALUATED = {AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED}


def scoring_slice_or_none(
    context: dg.AssetExecutionContext, io: RevisionsIOManager
) -> RunSlice | None:
    """The scoring run's slice, or None when the run materializes nothing (nothing to
    consume, or refused): the run then says why and keeps its checks' last results."""
    try:
        s = io.slice_for(context)
    except ScoringRangeError as refused:
        context.log.error(
            f"refused, nothing read or committed ({type(refused).__name__}): {refused}"
        )
        if refused.covers:
            context.instance.add_run_tags(
                context.run.run_id, {TAG_REFUSED: f"materialize {refused.covers}"}
            )
        keep_check_results(context)
        return None
    if s.skip is not None:
        context.log.info(f"{s.asset_key}: {s.skip}: no revision, no materialization")
        keep_check_results(context)
        return None
    return s


def keep_check_results(context: dg.AssetExecutionContext) -> None:
    """Report again the last evaluation of every check of the asset that this run planned
    (per partition of the run, for a partitioned check), as it was: see the module doc."""
    step = context.get_step_execution_context()
    graph = step.job_def.asset_layer.asset_graph
    storage = context.instance.event_log_storage
    for key in sorted(graph.asset_check_keys, key=lambda k: k.name):
        if key.asset_key != context.asset_key:
            continue
        partitioned = graph.get(key).partitions_def is not None
        for partition in context.partition_keys if partitioned else [None]:
            found = storage.get_asset_check_execution_history(
                key, limit=1, status=_EVALUATED, partition_filter=PartitionKeyFilter(key=partition)
            )
            last = found[0].evaluation if found else None
            if last is not None:
                context.log_event(_kept(last, found[0].run_id))


def _kept(evaluation: Any, run_id: str) -> dg.AssetCheckEvaluation:
    """``evaluation`` (of run ``run_id``) as it was, saying which run evaluated it."""
    evaluated_by = evaluation.metadata.get(KEPT_FROM_RUN) or dg.MetadataValue.dagster_run(run_id)
    return dg.AssetCheckEvaluation(
        asset_key=evaluation.asset_key,
        check_name=evaluation.check_name,
        passed=evaluation.passed,
        severity=evaluation.severity,
        description=evaluation.description,
        metadata={**evaluation.metadata, KEPT_FROM_RUN: evaluated_by},
        target_materialization_data=evaluation.target_materialization_data,
        blocking=evaluation.blocking,
        partition=evaluation.partition,
    )
