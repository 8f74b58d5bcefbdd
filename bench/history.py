"""Scenarios 3 and 4: what a long history costs a commit, and a change read of the last revision.

Histories are grown through the log layer (see staging.py); each measured commit
or read is a real one through the public API, on a warm handle (a long-lived
process) and on a fresh one (a new Dagster run opens the dataset, reading its log).
Scenario 3 runs with the default ``compact_after`` policy, as a real dataset would: a
history grown past it gets the compaction the policy would have made.
"""

from __future__ import annotations

import uuid

from revisions_assets import Revision, RevisionedDataset
from revisions_assets.core.log.records import TableWrite
from revisions_assets.core.log.revision_log import RevisionLog

from .data import ID, TABLE, entities, updates
from .harness import (
    Context,
    Outcome,
    Row,
    Timing,
    cpu_ratio,
    evaluate,
    fmt_seconds,
    measure,
    measure_pair,
    ratio,
    report,
)
from .scenarios import commit, new_dataset
from .staging import append, append_minors, linked_write

#: the entities of the tiny dataset whose commit latency is measured
TINY_N = 1_000


def commit_latency(ctx: Context) -> Outcome:
    """Scenario 3: latency of a tiny real commit as the log grows.

    The log grows through ``log_sizes`` for the plot; the headline ratio then times
    open + commit on the grown dataset and on a second one kept at the smallest size,
    alternately: measured one size after the other, the first size ran on a cold JVM."""
    spark, sizes = ctx.spark, ctx.config.log_sizes
    ds, template = _tiny_dataset(ctx, "s3")
    small, small_template = _tiny_dataset(ctx, "s3_small")
    append_minors(small, small_template, max(0, sizes[0] - small.head_sequence))
    gen = iter(range(2, 1_000_000))
    log = RevisionLog(ds.storage)  # a warm log handle for the log-only commit

    def fresh(root: str = ds.root) -> RevisionedDataset:
        return RevisionedDataset(root, spark=spark, id_columns=[ID])

    def tiny_commit(handle: RevisionedDataset) -> Revision:
        return commit(handle, updates(spark, TINY_N, 0.01, next(gen)), is_major=False)

    def log_only() -> None:
        log.refresh()
        name = uuid.uuid4().hex
        append(log, linked_write(ds.root, template, name), TABLE, name)
        log.after_commit()

    out = Outcome(plot=("3. commit latency as the log grows", "revisions in the log", "seconds"))
    results: dict[int, dict[str, Timing]] = {}
    for size in sizes:
        append_minors(ds, template, max(0, size - ds.head_sequence))
        warm = fresh()  # the long-lived handle of this size
        if warm.maintenance.compaction_due(TABLE):  # what the default policy would have done
            warm.maintenance.compact(TABLE)
        ctx.log(f"  log of {warm.head_sequence:,} revisions")
        results[size] = {
            "commit, fresh handle": measure(
                ctx, "open + commit (fresh handle)", lambda: tiny_commit(fresh())
            ),
            "commit, warm handle": measure(
                ctx, "commit (warm handle)", lambda w=warm: tiny_commit(w)
            ),
            "open handle": measure(ctx, "open handle", fresh),
            "log-only commit": measure(ctx, "log-only commit", log_only),
        }
        for kind, t in results[size].items():
            out.series.setdefault(kind, []).append((size, t.median))
    for root in (ds.root, small.root):  # no compaction inside a timed commit
        if (handle := fresh(root)).maintenance.compaction_due(TABLE):
            handle.maintenance.compact(TABLE)
    large_size, small_size = fresh().head_sequence, fresh(small.root).head_sequence
    large, little = measure_pair(
        ctx,
        (f"open + commit at {large_size:,}", lambda: tiny_commit(fresh())),
        (f"open + commit at {small_size:,}", lambda: tiny_commit(fresh(small.root))),
    )
    out.rows.append(
        report(
            ctx,
            Row(
                "3 commit latency vs log size",
                f"{sizes[-1]:,} vs {sizes[0]:,} revisions",
                [
                    f"open + commit, side by side: {fmt_seconds(little.median)} at "
                    f"{small_size:,}, {fmt_seconds(large.median)} at {large_size:,}",
                    *_figures(results[sizes[0]], results[sizes[-1]], sizes),
                ],
                ratio(large.median, little.median),
                f"open+commit at {sizes[-1]:,} / at {sizes[0]:,}",
                "<= 1.5",
                1.5,
                note="the ratio times both sizes alternately (two datasets); the other figures "
                "were measured one size after the other as the log grew, wall-time ratios: "
                + ", ".join(
                    f"{k} {ratio(results[sizes[-1]][k].median, results[sizes[0]][k].median):.2f}"
                    for k in results[sizes[0]]
                ),
                cpu_ratio=cpu_ratio(large, little),
            ),
        )
    )
    return out


def _tiny_dataset(ctx: Context, name: str) -> tuple[RevisionedDataset, TableWrite]:
    """A tiny dataset (a major and one real minor) and that minor's write, the template
    of the staged ones."""
    ds = new_dataset(ctx, name)
    commit(ds, entities(ctx.spark, TINY_N, 0), is_major=True)
    template = commit(ds, updates(ctx.spark, TINY_N, 0.01, 1), is_major=False).tables[TABLE]
    return ds, template


def _figures(small: dict[str, Timing], large: dict[str, Timing], sizes) -> list[str]:
    return [
        f"{kind}: {fmt_seconds(small[kind].median)} at {sizes[0]:,}, "
        f"{fmt_seconds(large[kind].median)} at {sizes[-1]:,}"
        for kind in small
    ]


def changes_of_last(ctx: Context) -> Outcome:
    """Scenario 4: the changes of the last revision (a real p minor) with short and long history."""
    cfg, spark, sizes = ctx.config, ctx.spark, ctx.config.history_sizes
    ds = new_dataset(ctx, "s4", compact_after=None)  # the read is of the last revision only
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    template = commit(ds, updates(spark, cfg.n, cfg.p, 1), is_major=False).tables[TABLE]
    root = ds.root
    out = Outcome(plot=("4. changes of the last revision", "revisions of history", "seconds"))
    results: dict[int, dict[str, Timing]] = {}
    for gen, size in enumerate(sizes, start=2):
        append_minors(ds, template, max(0, size - 1 - ds.head_sequence))
        ds = RevisionedDataset(root, spark=spark, id_columns=[ID], compact_after=None)
        last = commit(ds, updates(spark, cfg.n, cfg.p, gen), is_major=False)
        ctx.log(f"  history of {last.sequence:,} revisions")

        def read(handle: RevisionedDataset, since: int = last.sequence - 1) -> None:
            change = handle.changes(TABLE, since_sequence=since)
            if change.is_reset or len(change.revisions) != 1:
                raise RuntimeError("the benchmark expected the changes of exactly one revision")
            evaluate(change.df)

        results[size] = {
            "fresh handle": measure(
                ctx,
                "open + changes (fresh handle)",
                lambda: read(RevisionedDataset(root, spark=spark)),
            ),
            "warm handle": measure(ctx, "changes (warm handle)", lambda h=ds: read(h)),
        }
        for kind, t in results[size].items():
            out.series.setdefault(f"changes, {kind}", []).append((size, t.median))
    small, large = results[sizes[0]], results[sizes[-1]]
    warm = ratio(large["warm handle"].median, small["warm handle"].median)
    out.rows.append(
        report(
            ctx,
            Row(
                "4 changes of the last revision",
                f"{sizes[-1]:,} vs {sizes[0]:,} revisions of history",
                _figures(small, large, sizes),
                ratio(large["fresh handle"].median, small["fresh handle"].median),
                f"open+changes at {sizes[-1]:,} / at {sizes[0]:,}",
                "<= 1.5",
                1.5,
                note=f"warm-handle ratio {warm:.2f}",
                cpu_ratio=cpu_ratio(large["fresh handle"], small["fresh handle"]),
            ),
        )
    )
    return out
