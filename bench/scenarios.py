"""Scenarios 1, 2 and 5: the cost of a minor, of reading after minors, incremental scoring."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from revisions_assets import Revision, RevisionedDataset, UpstreamPosition

from .data import ID, TABLE, entities, score, updates
from .harness import (
    Context,
    Outcome,
    Row,
    at,
    cpu_ratio,
    evaluate,
    fmt_seconds,
    measure_pair,
    ratio,
    report,
)
from .staging import policy_points, stage_history

SCORES = "scores"


def commit(ds: RevisionedDataset, df: DataFrame, is_major: bool, **kwargs) -> Revision:
    """A real commit through the product, stamped one hour after the current head."""
    table = kwargs.pop("table", TABLE)
    record = ds.commit(
        {table: df}, timestamp=at(ds.head_sequence + 1), is_major=is_major, version="v1", **kwargs
    )
    if record is None:
        raise RuntimeError(f"{ds.root}: the benchmark committed an empty revision")
    return record


def new_dataset(ctx: Context, name: str, **options) -> RevisionedDataset:
    return RevisionedDataset(
        str(ctx.folder(name, "dataset")), spark=ctx.spark, id_columns=[ID], **options
    )


def minor_vs_major(ctx: Context) -> Outcome:
    """Scenario 1: a minor of p·N entities over the major of all N, both through ds.commit."""
    cfg, spark = ctx.config, ctx.spark
    ds = new_dataset(ctx, "s1")
    gen = iter(range(1, 10_000))
    commit(ds, entities(spark, cfg.n, 0), is_major=True)  # a minor needs a major first
    major, minor = measure_pair(
        ctx,
        ("major commit", lambda: commit(ds, entities(spark, cfg.n, next(gen)), is_major=True)),
        ("minor commit", lambda: commit(ds, updates(spark, cfg.n, cfg.p, next(gen)), False)),
    )
    # the Dagster IO manager commits every minor with skip_unchanged: what the comparison
    # with the state costs (every offered row changed here: all are written either way)
    skipping, minor_again = measure_pair(
        ctx,
        (
            "minor commit, skip_unchanged",
            lambda: commit(ds, updates(spark, cfg.n, cfg.p, next(gen)), False, skip_unchanged=True),
        ),
        ("minor commit", lambda: commit(ds, updates(spark, cfg.n, cfg.p, next(gen)), False)),
    )
    # the last two revisions: a skip_unchanged minor and a plain one, of p·N rows each
    files = [len(r.tables[TABLE].files) for r in ds.revisions(TABLE)[-2:]]
    plain = str(ctx.folder("s1", "plain"))
    plain_major, plain_minor = measure_pair(
        ctx,
        (
            "plain Spark write, all N",
            lambda: entities(spark, cfg.n, next(gen)).write.mode("overwrite").parquet(plain),
        ),
        (
            "plain Spark write, p·N",
            lambda: updates(spark, cfg.n, cfg.p, next(gen)).write.mode("overwrite").parquet(plain),
        ),
    )
    row = report(
        ctx,
        Row(
            "1 minor vs major",
            f"N={cfg.n:,}, p={cfg.p:.0%}",
            [
                f"minor commit {fmt_seconds(minor.median)}",
                f"major commit {fmt_seconds(major.median)}",
                f"plain Spark write: p·N {fmt_seconds(plain_minor.median)}, "
                f"N {fmt_seconds(plain_major.median)}",
            ],
            ratio(minor.median, major.median),
            "minor / major",
            "<= 0.10 (stated at N = 10M)",
            0.10,
            note=(
                f"plain Spark ratio {ratio(plain_minor.median, plain_major.median):.3f}; "
                f"commit / plain write: major {ratio(major.median, plain_major.median):.2f}x, "
                f"minor {ratio(minor.median, plain_minor.median):.2f}x"
            ),
            cpu_ratio=cpu_ratio(minor, major),
        ),
    )
    skip_row = report(
        ctx,
        Row(
            "1 skip-unchanged minor",
            f"N={cfg.n:,}, p={cfg.p:.0%}, every offered row changed",
            [
                f"with skip_unchanged {fmt_seconds(skipping.median)}",
                f"without {fmt_seconds(minor_again.median)}",
                f"files written: {files[0]} with, {files[1]} without",
            ],
            ratio(skipping.median, minor_again.median),
            "skip_unchanged / plain minor",
            "report the comparison's cost",
            note="the state is narrowed to the offered ids (a broadcast semi-join) before "
            "the anti-join on (ids, hash); the offered rows are persisted and counted first",
            cpu_ratio=cpu_ratio(skipping, minor_again),
        ),
    )
    return Outcome(rows=[row, skip_row])


def read_after_minors(ctx: Context) -> Outcome:
    """Scenario 2: the latest state after k minors over one plain-Parquet snapshot of it, and a
    time-travel read ``time_travel_back`` minors back in the longest history.

    From ``policy_from_k`` on, the history is what the default ``compact_after`` policy
    leaves: compactions where it would have made them (only those the measured reads use
    are written), at most ``compact_after`` minors on top. Below that, each read is followed
    by the merge-on-read floor over the same files (``merge_on_read_floor``).
    """
    cfg, spark = ctx.config, ctx.spark
    ds = new_dataset(ctx, "s2")
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    out = Outcome(plot=("2. latest-state read after k minors", "k minors", "read time (s)"))
    minors = 0
    for k in cfg.ks:
        for g in range(minors + 1, min(k, cfg.real_minors) + 1):
            commit(ds, updates(spark, cfg.n, cfg.p, g), is_major=False)
        staged_from = max(minors, cfg.real_minors) + 1
        wanted = [k, k - cfg.time_travel_back] if k == cfg.ks[-1] else [k]
        points = policy_points(staged_from, k, wanted) if k >= cfg.policy_from_k else []
        stage_history(ctx, ds, staged_from, k, compact_at=points)
        minors = k
        snapshot = str(ctx.folder("s2", f"snapshot_k{k}"))
        ds.read(TABLE).write.mode("overwrite").parquet(snapshot)
        on_base = ds.inspect.revisions_on_base(TABLE)
        ctx.log(f"  k = {k}: {len(ds.revisions(TABLE)) - 1} minors, {on_base} on the base read")
        ours, plain = measure_pair(
            ctx,
            (f"read after {k} minors", lambda: evaluate(ds.read(TABLE))),
            ("read plain Parquet snapshot", lambda s=snapshot: evaluate(spark.read.parquet(s))),
        )
        out.series.setdefault("revisioned read", []).append((k, ours.median))
        out.series.setdefault("plain Parquet snapshot", []).append((k, plain.median))
        policy = k >= cfg.policy_from_k
        threshold = 1.2 if policy else {1: 1.1, 10: 1.3}.get(k)
        how = "with the default policy" if policy else "without compaction"
        out.rows.append(
            report(
                ctx,
                Row(
                    "2 latest-state read",
                    f"k = {k} minors, {how}",
                    [f"ours {fmt_seconds(ours.median)}", f"plain {fmt_seconds(plain.median)}"],
                    ratio(ours.median, plain.median),
                    "ours / plain Parquet",
                    f"<= {threshold}" if threshold else "report growth with k",
                    threshold,
                    note=(
                        f"minors 1..{min(k, cfg.real_minors)} via ds.commit"
                        + (f", {cfg.real_minors + 1}..{k} staged" if k > cfg.real_minors else "")
                        + (f"; compactions after minors {points}" if points else "")
                        + f"; the read merges {on_base} revision(s) on its base"
                    ),
                    cpu_ratio=cpu_ratio(ours, plain),
                ),
            )
        )
        if not policy:
            out.rows.extend(merge_on_read_floor(ctx, ds, k, snapshot))
    back = cfg.time_travel_back
    if minors > back:
        past = f"HEAD~{back}"
        travel, latest = measure_pair(
            ctx,
            (f"read at {past}", lambda: evaluate(ds.read(TABLE, at=past))),
            ("latest read", lambda: evaluate(ds.read(TABLE))),
        )
        out.rows.append(
            report(
                ctx,
                Row(
                    "2 time travel",
                    f"{back} minors back in a {minors:,}-minor history, default policy",
                    [
                        f"at {past} {fmt_seconds(travel.median)}",
                        f"latest {fmt_seconds(latest.median)}",
                    ],
                    ratio(travel.median, latest.median),
                    "time travel / latest read",
                    "<= 1.5",
                    1.5,
                    cpu_ratio=cpu_ratio(travel, latest),
                ),
            )
        )
    return out


def merge_on_read_floor(ctx: Context, ds: RevisionedDataset, k: int, snapshot: str) -> list[Row]:
    """What any read that leaves the base's files unrewritten must cost, in raw Spark over
    the same files as the latest read after ``k`` minors: their plain union (every row, no
    merge: a reader that skipped replaced rows by position, as deletion vectors do, scans at
    least this), and the base anti-joined with a broadcast of the minors' ids plus the
    minors' rows (the cheapest correct merge of one minor; at k > 1 a lower bound, as it
    leaves out that a later minor replaces an earlier one's rows), each beside the snapshot."""
    spark = ctx.spark
    files = [[ds.storage.spark_uri(f) for f in r.tables[TABLE].files] for r in ds.revisions(TABLE)]
    base_files, minor_files = files[0], [u for part in files[1:] for u in part]
    columns = spark.read.parquet(snapshot).columns  # the data columns, as the snapshot has them

    def anti_join() -> DataFrame:
        minors = spark.read.parquet(*minor_files).select(*columns)
        base = spark.read.parquet(*base_files).select(*columns)
        return base.join(F.broadcast(minors.select(ID)), ID, "left_anti").unionByName(minors)

    cases = [
        (
            "union of the files, no merge",
            lambda: spark.read.parquet(*base_files, *minor_files).select(*columns),
            "reads every row of the base and the minors: the floor of any layout that does "
            "not rewrite the base",
        ),
        (
            "raw broadcast anti-join merge",
            anti_join,
            "the base anti-joined with a broadcast of the minors' ids, plus the minors' rows, in "
            "raw Spark: the cheapest correct merge of one minor"
            + (
                ""
                if k == 1
                else "; a lower bound here, as a later minor's rows replace an "
                "earlier one's and this leaves that out"
            ),
        ),
    ]
    rows = []
    for name, read, note in cases:
        floor, plain = measure_pair(
            ctx,
            (f"{name} after {k} minors", lambda r=read: evaluate(r())),
            ("read plain Parquet snapshot", lambda: evaluate(spark.read.parquet(snapshot))),
        )
        figures = [f"{name} {fmt_seconds(floor.median)}", f"plain {fmt_seconds(plain.median)}"]
        rows.append(
            report(
                ctx,
                Row(
                    "2 merge-on-read floor",
                    f"k = {k} minors: {name}",
                    figures,
                    ratio(floor.median, plain.median),
                    "raw Spark / plain Parquet",
                    "report the floor under the latest read",
                    note=note,
                    cpu_ratio=cpu_ratio(floor, plain),
                ),
            )
        )
    return rows


def incremental_scoring(ctx: Context) -> Outcome:
    """Scenario 5: re-scoring the changes of a p minor (minor of the scores) over a full
    re-score of the whole state (major of the scores)."""
    cfg, spark = ctx.config, ctx.spark
    features = new_dataset(ctx, "s5")
    scores = RevisionedDataset(
        str(ctx.folder("s5", "scores")), spark=spark, id_columns={SCORES: [ID]}
    )
    commit(features, entities(spark, cfg.n, 0), is_major=True)

    def position() -> list[UpstreamPosition]:
        return [UpstreamPosition(features.root, TABLE, features.head_sequence)]

    commit(scores, score(features.read(TABLE)), True, table=SCORES, upstream=position())
    gen = iter(range(1, 10_000))
    consumed = {"at": features.head_sequence}

    def new_minor() -> None:
        consumed["at"] = features.head_sequence
        commit(features, updates(spark, cfg.n, cfg.p, next(gen)), is_major=False)

    def incremental() -> None:
        change = features.changes(TABLE, since_sequence=consumed["at"])
        if change.is_reset:
            raise RuntimeError("the benchmark expected the changes of one minor, got a reset")
        upstream = [UpstreamPosition(features.root, TABLE, change.until_sequence)]
        commit(scores, score(change.df), False, table=SCORES, upstream=upstream)

    def full() -> None:
        commit(scores, score(features.read(TABLE)), True, table=SCORES, upstream=position())

    inc, fl = measure_pair(
        ctx, ("incremental re-score", incremental), ("full re-score", full), before=new_minor
    )
    row = report(
        ctx,
        Row(
            "5 incremental scoring",
            f"N={cfg.n:,}, p={cfg.p:.0%}",
            [
                f"changes + score + minor commit {fmt_seconds(inc.median)}",
                f"read state + score + major commit {fmt_seconds(fl.median)}",
            ],
            ratio(inc.median, fl.median),
            "incremental / full",
            "<= 0.10",
            0.10,
            note="both consume the same new features minor (committed untimed before each pair)",
            cpu_ratio=cpu_ratio(inc, fl),
        ),
    )
    return Outcome(rows=[row])
