"""Long logs crafted in seconds: a major, then one-row minors and no compaction.

Hourly minors reach 20,000 entries in 2.3 years, and a table whose compaction is off or
behind reads all of them. Such a log is written here directly, as a commit lays it out but
without a commit's costs: every minor has its own folder and data file (a hard link to
one of a few one-row Parquet files pyarrow wrote once: the engine opens every file) and its
own entry file (``Revision.to_json``), and the newest checkpoint and ``description.parquet``
are the log layer's own (``checkpoint_table``, ``RevisionLog.publish_description``).
Nothing is fsynced and no entry is created exclusively: no other writer runs. Older
checkpoints are left out: an open reads the newest only.

Revision ``i`` (from 2) writes the entity ``i % ids``: its row (``v = i``'s template
value, the id itself) or, every ``TOMBSTONE_EVERY``-th revision, its tombstone. The
latest state is therefore known without reading (``expected_state``), and which revision
each row came from tells whether 100,000 revisions merged in their order.

Scenario 18 (``long_logs``): per length, the time to open such a dataset
(``DatasetReader(root)``: the newest checkpoint and the entries after it), to open and read
its latest state on a fresh reader (every file through the file gate, then the merge), and
to read it with Spark (``RevisionedDataset.read``, evaluated).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.log.layout import (
    LAST_CHECKPOINT,
    LOG_DIR,
    LOG_MARKER,
    checkpoint_path,
    entry_path,
)
from revisions_assets.core.log.records import Revision, TableWrite, canonical_json
from revisions_assets.core.log.revision_log import (
    CHECKPOINT_INTERVAL,
    RevisionLog,
    checkpoint_table,
)
from revisions_assets.core.storage.base import LocalStorage

from .harness import Context, Outcome, Row, evaluate, measure, ratio, report

TABLE = "t"
#: the first revision's logical time; revision i is stamped i hours later
START = datetime(2024, 1, 1, tzinfo=UTC)
TOMBSTONE_EVERY = 7
SCHEMA_JSON = canonical_json(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
)


def _parquet(ids: list[int], deleted: bool) -> bytes:
    rows = {
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([None if deleted else i for i in ids], pa.int64()),
        "_deleted": pa.array([deleted] * len(ids)),
    }
    buf = io.BytesIO()
    pq.write_table(pa.table(rows), buf)
    return buf.getvalue()


def name_of(sequence: int) -> str:
    return f"m{sequence:06d}"


def is_tombstone(sequence: int) -> bool:
    return sequence > 1 and sequence % TOMBSTONE_EVERY == 0


def craft_log(
    root: str | os.PathLike[str], entries: int, ids: int = 1_000, *, covered_entries: bool = True
) -> None:
    """A dataset at ``root`` (absent or empty) of ``entries`` revisions of table ``t``: a
    major of ids ``0..ids-1``, then ``entries - 1`` one-row minors (see the module doc).

    ``covered_entries=False`` leaves out the entry files the newest checkpoint holds: no
    read opens them (an open reads that checkpoint and the entries after it), and they are
    a third of the files; ``verify`` would report them as a gap the checkpoint covers."""
    base = Path(root)
    (base / LOG_DIR).mkdir(parents=True)
    (base / LOG_MARKER).write_bytes(b'{"format":1}')
    checkpoint = entries - entries % CHECKPOINT_INTERVAL
    with tempfile.TemporaryDirectory(dir=base.parent) as folder:
        templates = _templates(Path(folder), ids)
        records = [_revision(base, sequence, templates, ids) for sequence in range(1, entries + 1)]
    for record in records[0 if covered_entries else checkpoint :]:
        (base / entry_path(record.sequence)).write_text(record.to_json(str(base)))
    if checkpoint:
        buf = io.BytesIO()
        table = checkpoint_table(records[:checkpoint], str(base))
        pq.write_table(table, buf, compression="zstd")
        (base / checkpoint_path(checkpoint)).write_bytes(buf.getvalue())
        (base / LAST_CHECKPOINT).write_text(json.dumps({"sequence": checkpoint}))
    RevisionLog(LocalStorage(base)).publish_description()


def _templates(folder: Path, ids: int) -> dict[tuple[int, bool], tuple[Path, int]]:
    """A one-row Parquet file per id, row and tombstone, and its size: what the minors'
    files link to."""
    out = {}
    for i in range(ids):
        for deleted in (False, True):
            data = _parquet([i], deleted)
            path = folder / f"{i}-{deleted}.parquet"
            path.write_bytes(data)
            out[i, deleted] = (path, len(data))
    return out


def _revision(
    base: Path, sequence: int, templates: dict[tuple[int, bool], tuple[Path, int]], ids: int
) -> Revision:
    """Revision ``sequence``'s folder and data file (a hard link to its template for a
    minor), and its record."""
    name = name_of(sequence)
    path = f"{name}/{TABLE}/part-00000.parquet"
    os.mkdir(base / name)  # two calls, where mkdir(parents=True) makes three and a failure
    os.mkdir(base / name / TABLE)
    if sequence == 1:
        data = _parquet(list(range(ids)), False)
        (base / path).write_bytes(data)
        count, tombstones, size = ids, 0, len(data)
    else:
        template, size = templates[sequence % ids, is_tombstone(sequence)]
        os.link(template, base / path)
        count, tombstones = 1, int(is_tombstone(sequence))
    write = TableWrite(
        id_columns=("id",),
        schema_json=SCHEMA_JSON,
        version="v1",
        rows=count,
        tombstones=tombstones,
        files=(path,),
        bytes=size,
    )
    stamp = START + timedelta(hours=sequence)
    return Revision(
        name=name,
        timestamp=stamp,
        is_major=sequence == 1,
        sequence=sequence,
        committed_at=stamp,
        tables={TABLE: write},
        version="v1",
    )


def expected_state(entries: int, ids: int = 1_000) -> dict[int, str]:
    """{id: the name of the revision its latest row comes from} after ``entries``
    revisions: the entities whose last writer wrote a tombstone are gone."""
    last = {i: 1 for i in range(ids)}
    for sequence in range(2, entries + 1):
        last[sequence % ids] = sequence
    return {i: name_of(s) for i, s in last.items() if not is_tombstone(s)}


def long_logs(ctx: Context) -> Outcome:
    """Open and read at each of ``Config.long_log_sizes`` entries (Spark at
    ``long_log_spark_sizes``); the ratio: the reader's read time per entry against the
    shortest log's (linear growth keeps it near 1)."""
    cfg = ctx.config
    outcome = Outcome(plot=("Open and read a long log, no compaction", "entries", "seconds"))
    first: tuple[int, float] | None = None
    for entries in cfg.long_log_sizes:
        root = ctx.folder("s16", str(entries)) / "ds"
        if not root.exists():
            craft_log(root, entries)
        opened = measure(ctx, f"open, {entries:,} entries", lambda r=root: DatasetReader(r))
        read = measure(
            ctx, f"open and read, {entries:,}", lambda r=root: DatasetReader(r).read(TABLE)
        )
        figures = [str(opened), str(read)]
        outcome.series.setdefault("open", []).append((entries, opened.median))
        outcome.series.setdefault("reader", []).append((entries, read.median))
        if entries in cfg.long_log_spark_sizes:
            spark = measure(
                ctx,
                f"Spark read, {entries:,}",
                lambda r=root: evaluate(RevisionedDataset(str(r), ctx.spark).read(TABLE)),
            )
            figures.append(str(spark))
            outcome.series.setdefault("Spark", []).append((entries, spark.median))
        first = first or (entries, read.median)
        outcome.rows.append(
            report(
                ctx,
                Row(
                    scenario="18 long log",
                    case=f"{entries:,} entries, one-row minors on a major, no compaction",
                    figures=figures,
                    ratio=ratio(read.median / entries, first[1] / first[0]),
                    ratio_label=f"reader read time per entry / at {first[0]:,} entries",
                    goal="<= 1.5 (no worse than linear)",
                    threshold=1.5,
                ),
            )
        )
    return outcome
