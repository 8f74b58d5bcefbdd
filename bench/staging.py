"""Growing a dataset's history fast, through the log layer instead of one Spark job per commit.

Thousands of real commits would take hours, so long histories are appended with
``RevisionLog.try_append`` (the very call ``RevisionedDataset.commit`` ends with)
using realistic records: the id columns, schema, counts and files of a real
revision. Every revision gets files of its own (hard links to a real revision's files,
or files a single Spark job wrote for many revisions), as every committed revision has.
Where the default ``compact_after`` policy would have compacted, the histories get a
real compaction (``ds.maintenance.compact()``). What is then measured always goes through the
public API.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset
from revisions_assets.core.dataset import DEFAULT_COMPACT_AFTER
from revisions_assets.core.log.file_stats import read_file_stats
from revisions_assets.core.log.records import Revision, TableWrite
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.base import LocalStorage
from revisions_assets.core.timeutil import now_utc

from .data import TABLE, many_updates
from .harness import Context, at

PRODUCER = {"asset_key": "bench/entities", "run_id": "staged", "partition_key": "2024-01-01"}


def linked_write(root: str, template: TableWrite, name: str, table: str = TABLE) -> TableWrite:
    """``template``'s files hard-linked into revision folder ``name``: a revision's own files
    with the template's rows, at no cost."""
    target = Path(root) / name / table
    target.mkdir(parents=True)
    files = []
    for path in template.files:
        os.link(Path(root) / path, target / Path(path).name)
        files.append(f"{name}/{table}/{Path(path).name}")
    stats = template.file_stats  # the same bytes: the same statistics, under the new paths
    if stats is not None:
        stats = tuple(dataclasses.replace(s, path=f) for s, f in zip(stats, files, strict=True))
    return dataclasses.replace(template, files=tuple(files), file_stats=stats)


def append_minors(ds: RevisionedDataset, template: TableWrite, count: int, table: str = TABLE):
    """Append ``count`` minor revisions, each with a hard-linked copy of ``template``'s files.

    ``ds`` is not refreshed: open a new handle afterwards (it reads the newest checkpoint,
    cheaper than probing thousands of new entries one by one).
    """
    log = RevisionLog(ds.storage)
    log.refresh()
    for _ in range(count):
        name = uuid.uuid4().hex
        append(log, linked_write(ds.root, template, name, table), table, name)
    log.after_commit()


def append(log: RevisionLog, write: TableWrite, table: str, name: str) -> Revision:
    """Commit one minor revision of ``write`` through the log layer."""
    sequence = log.head + 1
    record = Revision(
        name=name,
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


def policy_points(first: int, last: int, wanted: Iterable[int]) -> list[int]:
    """Where the default policy compacts (after every ``compact_after + 1`` minors on a base)
    that a read at a position in ``wanted`` (minor numbers) uses, within ``first..last``."""
    step = DEFAULT_COMPACT_AFTER + 1
    points = {(q // step) * step for q in wanted}
    return sorted(p for p in points if first <= p <= last)


def stage_history(
    ctx: Context, ds: RevisionedDataset, first: int, last: int, compact_at: Iterable[int] = ()
) -> None:
    """Minors ``first..last`` (generations of ``data.updates``), with a real compaction after
    each minor number in ``compact_at``."""
    start = first
    for point in [*sorted(compact_at), None]:
        end = last if point is None else point
        stage_minors(ctx, ds, start, end)
        if point is not None:
            ds.maintenance.compact()
        start = end + 1


def stage_minors(ctx: Context, ds: RevisionedDataset, first: int, last: int) -> None:
    """Write the updates of generations ``first..last`` with ONE Spark job, then commit one
    minor each.

    Each generation's rows land in one Parquet file with exactly the columns a commit
    writes (the table's columns and ``_deleted``); the files are moved into their own
    revision folder and committed through the log layer.
    """
    if last < first:
        return
    if not isinstance(ds.storage, LocalStorage):
        raise TypeError("staging moves files on the local filesystem only")
    spark, cfg = ctx.spark, ctx.config
    staging = ctx.folder("staging", uuid.uuid4().hex)
    (
        many_updates(spark, cfg.n, cfg.p, first, last)
        .withColumn("_deleted", F.lit(False))
        .repartition("_generation")
        .write.partitionBy("_generation")
        .mode("overwrite")
        .parquet(str(staging))
    )
    template = ds.revisions(TABLE)[-1].tables[TABLE]
    log = RevisionLog(ds.storage)
    log.refresh()
    root = Path(ds.root)
    for g in range(first, last + 1):
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
            # as a commit records them, from the footers
            file_stats=read_file_stats(
                ds.storage, files, template.id_columns, template.schema_json
            ),
        )
        append(log, write, TABLE, name)
    log.after_commit()
    ds.refresh()
