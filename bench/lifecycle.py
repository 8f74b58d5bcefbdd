"""Scenario 8: what maintenance costs. A compaction against a major commit of the same rows,
and the driver time of a vacuum dry run over a long history."""

from __future__ import annotations

from datetime import timedelta

from revisions_assets import RevisionedDataset

from .data import TABLE, entities, updates
from .harness import (
    Context,
    Outcome,
    Row,
    cpu_ratio,
    fmt_seconds,
    measure,
    measure_pair,
    ratio,
    report,
)
from .history import TINY_N
from .scenarios import commit, new_dataset
from .staging import append_minors, stage_minors


def maintenance(ctx: Context) -> Outcome:
    cfg, spark = ctx.config, ctx.spark
    ds = new_dataset(ctx, "s8", compact_after=None)
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    generation = {"next": 1}

    def new_minors() -> None:  # what the policy compacts: its number of minors on a base
        first = generation["next"]
        generation["next"] += cfg.compaction_minors
        stage_minors(ctx, ds, first, generation["next"] - 1)

    def compaction() -> None:
        if ds.maintenance.compact(TABLE) is None:
            raise RuntimeError("the benchmark expected a compaction")

    compacted, major = measure_pair(
        ctx,
        (f"compaction of the base + {cfg.compaction_minors} minors", compaction),
        ("major commit of the same rows", lambda: commit(ds, entities(spark, cfg.n, 9), True)),
        before=new_minors,
    )
    rows = [
        report(
            ctx,
            Row(
                "8 compaction vs major",
                f"N={cfg.n:,}, {cfg.compaction_minors} minors of p={cfg.p:.0%} on the base",
                [
                    f"compaction {fmt_seconds(compacted.median)}",
                    f"major commit {fmt_seconds(major.median)}",
                ],
                ratio(compacted.median, major.median),
                "compaction / major commit",
                "<= 1.2",
                1.2,
                note="the minors are staged (untimed) before each pair",
                cpu_ratio=cpu_ratio(compacted, major),
            ),
        )
    ]

    tiny = new_dataset(ctx, "s8-vacuum", compact_after=None)
    commit(tiny, entities(spark, TINY_N, 0), is_major=True)
    template = commit(tiny, updates(spark, TINY_N, 0.01, 1), is_major=False).tables[TABLE]
    append_minors(tiny, template, max(0, cfg.vacuum_revisions - tiny.head_sequence - 1))
    tiny.refresh()
    tiny.maintenance.compact(TABLE)
    records = len(tiny.revisions())
    dry = tiny.maintenance.vacuum(retain=timedelta(0), dry_run=True)
    files = len(tiny.storage.list_files(""))
    vacuum = measure(
        ctx,
        f"vacuum dry run over {records:,} log entries",
        lambda: tiny.maintenance.vacuum(retain=timedelta(0), dry_run=True),
    )
    open_handle = measure(ctx, "open a handle", lambda: RevisionedDataset(tiny.root, spark=spark))
    rows.append(
        report(
            ctx,
            Row(
                "8 vacuum dry run",
                f"{records:,} log entries, {files:,} files listed",
                [
                    f"dry run {fmt_seconds(vacuum.median)} (driver only, no Spark)",
                    f"open a handle {fmt_seconds(open_handle.median)}",
                    f"would remove {len(dry.revisions):,} revisions, {dry.files:,} files",
                ],
                ratio(vacuum.median, open_handle.median),
                "dry run / opening the dataset",
                "report the driver time",
                None,
                cpu_ratio=cpu_ratio(vacuum, open_handle),
            ),
        )
    )
    return Outcome(rows=rows)
