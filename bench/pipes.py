"""Scenario 14: a featurized partition committed by a remote job through Dagster Pipes.

A dataset of 1,000 revisions (``Config.pipes_revisions``: a major, real minors staged
through the log layer, compacted as the default policy would have) takes one new minor of
``p x N`` entities per run, the two sides alternately, each on its own day:

* **through Pipes**: a ``pipes=True`` featurized asset materialized in Dagster, its job
  (``bench/pipes_job.py``) launched by ``PipesSubprocessClient`` as a separate Python
  process with its own local Spark. The orchestrator's overhead is the run's time outside
  the job: from the step's start to the launch (the slice, read from the log) and from the
  client's return to the step's end (the log checked, the materialization), from the
  event log's timestamps;
* **in-process**: the same minor committed by ``open_revision_job`` by hand in this
  process, on the bench's session.

The commit's own time is ``job.commit(...)`` timed inside each job (the engine's commit and
the report), so the process start, the JVM start and the job's warm-up are left out.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from revisions_assets.dagster import RevisionJob, featurized_asset, revisions_resources
from revisions_assets.pipes import open_revision_job

from .data import ID, TABLE, entities, updates
from .harness import Context, Outcome, Row, at, fmt_seconds, ratio, report
from .scenarios import commit, new_dataset
from .staging import append_minors

REPO = Path(__file__).resolve().parents[1]
DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01")
#: the bench session's settings the remote job's session takes too
SPARK_KEYS = (
    "spark.driver.memory",
    "spark.sql.adaptive.enabled",
    "spark.sql.shuffle.partitions",
    "spark.ui.enabled",
)


def pipes_commit(ctx: Context) -> Outcome:
    ds = new_dataset(ctx, "pipes")
    commit(ds, entities(ctx.spark, ctx.config.n, 0), is_major=True)
    template = commit(ds, updates(ctx.spark, ctx.config.n, ctx.config.p, 1), False).tables[TABLE]
    revisions = ctx.config.pipes_revisions
    append_minors(ds, template, revisions - ds.head_sequence)
    ds = new_dataset(ctx, "pipes")
    if ds.compaction_due(TABLE):  # what the default policy would have done
        ds.compact(TABLE)
    ctx.log(f"  log of {ds.head_sequence:,} entries")
    day = at(revisions + 24).replace(hour=0)  # the first day after the staged revisions
    conf = {k: ctx.spark.sparkContext.getConf().get(k) for k in SPARK_KEYS}
    remote = _RemoteRuns(ctx, str(Path(ds.root).parent), conf)
    in_process, through_pipes, overhead, before, after = [], [], [], [], []
    for rep in range(ctx.config.warmup + ctx.config.reps):
        generation = 2 + 2 * rep
        start = day + timedelta(days=2 * rep)
        with open_revision_job(
            dataset_root=ds.root,
            table=TABLE,
            id_columns=[ID],
            code_version="v1",
            window=(start, start + timedelta(days=1)),
        ) as job:
            rows = updates(ctx.spark, ctx.config.n, ctx.config.p, generation)
            t0 = time.perf_counter()
            job.commit({TABLE: rows})
            local = time.perf_counter() - t0
        seconds, slice_s, check_s = remote.run(start + timedelta(days=1), generation + 1)
        ctx.log(
            f"    rep {rep}: in-process {fmt_seconds(local)}, through Pipes {fmt_seconds(seconds)}"
            f"; orchestrator {fmt_seconds(slice_s)} before + {fmt_seconds(check_s)} after"
            + (" (warm-up)" if rep < ctx.config.warmup else "")
        )
        if rep >= ctx.config.warmup:
            in_process.append(local)
            through_pipes.append(seconds)
            before.append(slice_s)
            after.append(check_s)
            overhead.append(slice_s + check_s)
    head = new_dataset(ctx, "pipes").head_sequence
    med = statistics.median
    out = Outcome()
    out.rows.append(
        report(
            ctx,
            Row(
                "14 Pipes run",
                f"orchestrator overhead at {revisions:,} revisions",
                [
                    f"before the launch (the slice): {fmt_seconds(med(before))}",
                    f"after the job (the log checked, materialized): {fmt_seconds(med(after))}",
                ],
                med(overhead),
                "seconds outside the job",
                "<= 1 s",
                1.0,
                note=f"a pipes=True featurized asset materialized in Dagster (ephemeral "
                f"instance); log of {revisions:,}..{head:,} entries; from the event log's "
                "timestamps: step start to launch, client return to step end",
            ),
        )
    )
    out.rows.append(
        report(
            ctx,
            Row(
                "14 Pipes run",
                f"commit of a {ctx.config.p:.0%} minor, N = {ctx.config.n:,}",
                [
                    f"through PipesSubprocessClient: {fmt_seconds(med(through_pipes))}",
                    f"in-process: {fmt_seconds(med(in_process))}",
                ],
                ratio(med(through_pipes), med(in_process)),
                "job.commit through Pipes / in-process",
                "<= 1.1",
                1.1,
                note="job.commit(...) timed inside each job (the engine's commit and the "
                "report), after a warm-up in the remote job's fresh JVM (the table's state "
                "read, the rows computed); process and JVM start excluded; the two sides "
                "alternate, each on its own day",
            ),
        )
    )
    return out


class _RemoteRuns:
    """Dagster runs of a ``pipes=True`` featurized asset over the bench's dataset."""

    def __init__(self, ctx: Context, base: str, conf: dict[str, str]):
        self.ctx, self.conf = ctx, conf
        self.marks: dict[str, float] = {}  # wall-clock times around the client's run
        self.extras: dict[str, Any] = {}  # the next run's extras beside the slice
        self.instance = dg.DagsterInstance.ephemeral()
        self.timing = ctx.folder("pipes-timing") / "commit.txt"
        runs = self

        @featurized_asset(
            name=TABLE,
            id_columns=[ID],
            partitions_def=DAILY,
            code_version="v1",
            dataset=Path(new_dataset(ctx, "pipes").root).name,
            table=TABLE,
            pipes=True,
        )
        def remote(
            context: dg.AssetExecutionContext,
            job: RevisionJob,
            pipes_client: dg.PipesSubprocessClient,
        ) -> Any:
            runs.marks["launch"] = time.time()
            done = pipes_client.run(
                context=context,
                extras={**job.extras, **runs.extras},
                command=[sys.executable, "-m", "bench.pipes_job"],
            )
            runs.marks["returned"] = time.time()
            return done

        self.asset = remote
        self.resources = {
            **revisions_resources(base),
            "pipes_client": dg.PipesSubprocessClient(cwd=str(REPO)),
        }

    def run(self, day: Any, generation: int) -> tuple[float, float, float]:
        """One run for ``day``: (the commit's seconds in the job, before, after)."""
        cfg = self.ctx.config
        self.extras = {
            "n": cfg.n,
            "p": cfg.p,
            "generation": generation,
            "conf": self.conf,
            "timing": str(self.timing),
        }
        result = dg.materialize(
            [self.asset],
            partition_key=day.strftime("%Y-%m-%d"),
            instance=self.instance,
            resources=self.resources,
        )
        stamps = {
            e.dagster_event.event_type_value: e.timestamp
            for e in self.instance.all_logs(result.run_id)
            if e.dagster_event is not None
        }
        return (
            float(self.timing.read_text()),
            self.marks["launch"] - stamps["STEP_START"],
            stamps["STEP_SUCCESS"] - self.marks["returned"],
        )
