"""Scenarios 9 and 10 (issue 11): what row hashes save a consumer.

9. A featurized minor recomputes 10 % of the entities, of which 1 % of all entities really
   changed, committed with ``skip_unchanged``: the scoring side reads only real changes.
   Reported: the rows the consumer processes over the really-changed rows (goal <= 1.2),
   and its cost (changes + score + minor commit) over a full re-score (goal <= 0.10).
10. A soft major: a featurized major whose values changed for 1 % of the entities,
   committed with ``skip_unchanged`` (a carrying major: only its changed rows are written).
   The consumer re-scores ``ChangeSet.changed`` and commits those scores, with tombstones
   for the entities deleted upstream, as a carrying major (``carry=True``: the previous
   scores of every other entity are kept, not read), over re-scoring the whole reset and
   committing a complete major (goal <= 0.2).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset, UpstreamPosition
from revisions_assets.core.columns import DELETED

from .data import ID, TABLE, entities, features, score, update_ids
from .harness import (
    Context,
    Outcome,
    Row,
    at,
    cpu_ratio,
    fmt_seconds,
    measure_pair,
    ratio,
    report,
)
from .scenarios import SCORES, commit, new_dataset


def _recomputed(ctx: Context, share: float, changed_every: int, generation: int) -> DataFrame:
    """``share`` of the entities recomputed: one in ``changed_every`` of them gets new values
    (generation ``generation``), the others their generation-0 values again."""
    ids = update_ids(ctx.spark, ctx.config.n, share, generation)
    picked = F.abs(F.xxhash64(F.col(ID), F.lit(generation))) % changed_every == 0
    gen = F.when(picked, F.lit(generation)).otherwise(F.lit(0))
    return features(ids.withColumn("_gen", gen), F.col("_gen"))


def _setup(ctx: Context, name: str) -> tuple[RevisionedDataset, RevisionedDataset]:
    spark = ctx.spark
    feats = new_dataset(ctx, name, skip_unchanged=True)
    scores = RevisionedDataset(
        str(ctx.folder(name, "scores")), spark=spark, id_columns={SCORES: [ID]}
    )
    commit(feats, entities(spark, ctx.config.n, 0), is_major=True)
    position = [UpstreamPosition(feats.root, TABLE, feats.head_sequence)]
    commit(scores, score(feats.read(TABLE)), True, table=SCORES, upstream=position)
    return feats, scores


def unchanged_rows_skipped(ctx: Context) -> Outcome:
    """Scenario 9."""
    feats, scores = _setup(ctx, "s9")
    gen = iter(range(1, 10_000))
    consumed = {"at": feats.head_sequence, "processed": [], "real": []}

    def new_minor() -> None:
        consumed["at"] = feats.head_sequence
        g = next(gen)
        offered = _recomputed(ctx, 0.10, 10, g)  # 10 % recomputed, 1 % of all changed
        stamp = at(feats.head_sequence + 1)
        record = feats.commit({TABLE: offered}, timestamp=stamp, is_major=False, version="v1")
        consumed["real"].append(record.tables[TABLE].rows if record is not None else 0)

    def incremental() -> None:
        change = feats.changes(TABLE, since_sequence=consumed["at"], only_changed=True)
        upstream = [UpstreamPosition(feats.root, TABLE, change.until_sequence)]
        commit(scores, score(change.df), False, table=SCORES, upstream=upstream)
        consumed["processed"].append(scores.revisions(SCORES)[-1].tables[SCORES].rows)

    def full() -> None:
        position = [UpstreamPosition(feats.root, TABLE, feats.head_sequence)]
        commit(scores, score(feats.read(TABLE)), True, table=SCORES, upstream=position)

    inc, fl = measure_pair(
        ctx,
        ("real changes + score + minor", incremental),
        ("full re-score", full),
        before=new_minor,
    )
    processed, real = sum(consumed["processed"]), max(1, sum(consumed["real"]))
    rows = [
        report(
            ctx,
            Row(
                "9 unchanged rows skipped",
                f"N={ctx.config.n:,}, 10% recomputed, 1% changed",
                [f"rows processed {processed:,}", f"really changed {real:,}"],
                processed / real,
                "processed / really changed",
                "<= 1.2",
                1.2,
            ),
        ),
        report(
            ctx,
            Row(
                "9 unchanged rows skipped",
                f"N={ctx.config.n:,}, 10% recomputed, 1% changed",
                [
                    f"changes + score + minor {fmt_seconds(inc.median)}",
                    f"read state + score + major {fmt_seconds(fl.median)}",
                ],
                ratio(inc.median, fl.median),
                "incremental / full",
                "<= 0.10",
                0.10,
                note="the features minor (skip_unchanged) is committed untimed before each pair",
                cpu_ratio=cpu_ratio(inc, fl),
            ),
        ),
    ]
    return Outcome(rows=rows)


def soft_major(ctx: Context) -> Outcome:
    """Scenario 10."""
    feats, scores = _setup(ctx, "s10")
    gen = iter(range(1, 10_000))
    consumed = {"at": feats.head_sequence}

    def new_major() -> None:
        consumed["at"] = feats.head_sequence
        state = feats.read(TABLE)
        changed = _recomputed(ctx, 0.01, 1, next(gen))  # 1 % of the entities, all changed
        kept = state.join(changed.select(ID), ID, "left_anti")
        commit(feats, kept.unionByName(changed), is_major=True)

    def soft() -> None:
        change = feats.changes(TABLE, since_sequence=consumed["at"])
        assert change.is_reset and change.changed is not None
        changed = change.changed.localCheckpoint()  # read twice, computed once (as in Dagster)
        rescored = score(changed.where(~F.col(DELETED)).drop(DELETED))
        tombstones = changed.where(F.col(DELETED)).select(ID).withColumn(DELETED, F.lit(True))
        rows = rescored.withColumn(DELETED, F.lit(False)).unionByName(
            tombstones, allowMissingColumns=True
        )
        upstream = [UpstreamPosition(feats.root, TABLE, change.until_sequence)]
        commit(scores, rows, True, table=SCORES, upstream=upstream, carry=True)

    def full() -> None:
        change = feats.changes(TABLE, since_sequence=consumed["at"])
        upstream = [UpstreamPosition(feats.root, TABLE, change.until_sequence)]
        complete = score(change.df.drop(DELETED))
        commit(
            scores,
            complete,
            True,
            table=SCORES,
            upstream=upstream,
            skip_unchanged=False,  # a complete major: every score written
            carry=False,
        )

    sm, fl = measure_pair(
        ctx, ("soft major: changed only", soft), ("full re-score of the reset", full), new_major
    )
    row = report(
        ctx,
        Row(
            "10 soft major",
            f"N={ctx.config.n:,}, 1% of values changed",
            [
                f"changed + score + carrying major {fmt_seconds(sm.median)}",
                f"score all + complete major {fmt_seconds(fl.median)}",
            ],
            ratio(sm.median, fl.median),
            "soft / full",
            "<= 0.2",
            0.2,
            note="both consume the same features major (a carrying major, `skip_unchanged`, "
            "committed untimed before each pair); the soft side computes `changed` once "
            "(localCheckpoint) and commits its scores and tombstones as a carrying major "
            "(`carry=True`), as the Dagster scoring assets do, but without `skip_unchanged` "
            "(the IO manager passes it: it compares the rows with the hashes of the whole "
            "scores state); the full side re-scores the whole reset and commits a complete "
            "major",
            cpu_ratio=cpu_ratio(sm, fl),
        ),
    )
    return Outcome(rows=[row])
