"""Growing a dataset's history fast, through the log layer instead of one Spark job per commit.

Thousands of real commits would take hours, so long histories are appended with
``RevisionLog.try_append`` (the very call ``RevisionedDataset.commit`` ends with)
using realistic records: the id columns, schema, counts and files of a real
revision. What is then measured always goes through the public API.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Sequence
from functools import reduce
from pathlib import Path

from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset
from revisions_assets.core.log import RevisionLog
from revisions_assets.core.records import Revision, TableWrite
from revisions_assets.core.storage import LocalStorage
from revisions_assets.core.timeutil import now_utc

from .data import TABLE, updates
from .harness import Context, at

PRODUCER = {"asset_key": "bench/entities", "run_id": "staged", "partition_key": "2024-01-01"}


def append_minors(ds: RevisionedDataset, template: TableWrite, count: int, table: str = TABLE):
    """Append ``count`` minor revisions that re-reference ``template``'s files.

    ``ds`` is not refreshed: open a new handle afterwards (it reads the newest checkpoint,
    cheaper than probing thousands of new entries one by one).
    """
    log = RevisionLog(ds.storage)
    log.refresh()
    for _ in range(count):
        _append(log, template, table)
    log.after_commit()


def _append(log: RevisionLog, write: TableWrite, table: str, name: str = "") -> Revision:
    sequence = log.head + 1
    record = Revision(
        name=name or uuid.uuid4().hex,
        timestamp=at(sequence),
        is_major=False,
        sequence=sequence,
        committed_at=now_utc(),
        tables={table: write},
        version="v1",
        producer=dict(PRODUCER),
    )
    if not log.try_append(record):
        raise RuntimeError(f"{log.storage.uri}: sequence {sequence} was taken by another writer")
    return record


def stage_minors(ctx: Context, ds: RevisionedDataset, generations: Sequence[int]) -> None:
    """Write the updates of ``generations`` with ONE Spark job, then commit one minor each.

    Each generation's rows land in one Parquet file with exactly the columns a commit
    writes (the table's columns and ``_deleted``); the files are moved into their own
    revision folder and committed through the log layer.
    """
    if not generations:
        return
    if not isinstance(ds.storage, LocalStorage):
        raise TypeError("staging moves files on the local filesystem only")
    spark, cfg = ctx.spark, ctx.config
    frames = [
        updates(spark, cfg.n, cfg.p, g).withColumns(
            {"_deleted": F.lit(False), "_generation": F.lit(g)}
        )
        for g in generations
    ]
    staging = ctx.folder("staging", uuid.uuid4().hex)
    (
        reduce(lambda a, b: a.unionByName(b), frames)
        .repartition(len(generations), "_generation")
        .write.partitionBy("_generation")
        .mode("overwrite")
        .parquet(str(staging))
    )
    template = ds.revisions(TABLE)[-1].tables[TABLE]
    log = RevisionLog(ds.storage)
    log.refresh()
    root = Path(ds.root)
    for g in generations:
        name = uuid.uuid4().hex
        target = root / name / TABLE
        target.mkdir(parents=True)
        files = []
        for src in sorted((staging / f"_generation={g}").glob("*.parquet")):
            os.rename(src, target / src.name)
            files.append(f"{name}/{TABLE}/{src.name}")
        write = dataclasses.replace(
            template,
            rows=max(1, int(cfg.n * cfg.p)),
            tombstones=0,
            files=tuple(files),
            bytes=sum((root / f).stat().st_size for f in files),
        )
        _append(log, write, TABLE, name)
    log.after_commit()
    ds.refresh()
