"""Scenario 15: training sets without a JVM, and against Feast's file offline store.

* Fresh process, time to a training set: E = N/2 events joined as of their time to a table of
  N entities x 11 columns with 10 minors of p·N (real commits), every revision known
  (``known_at="all_committed"``, what Feast's file store answers by default), through
  ``DatasetReader.as_of_join`` (Polars, the events read from Parquet, the result collected)
  vs the engine's ``as_of_join`` (a Spark session started, the result into a no-op sink).
* The same join vs Feast's built-in file offline store (``FileSource``) over the same rows
  exported as plain Parquet, one row per revision's write with its revision's timestamp and
  commit time as event and created timestamps: ``get_historical_features(...).to_df()`` in a
  fresh process, time and peak memory (``VmHWM``) of each process. Beside it, reported: the
  same retrieval through ``RevisionsOfflineStore`` (Feast's ``FeatureStore``, pandas in and
  out), and the reader's peak with lazy events sunk to Parquet.
* Leaks: a major, then a late correction of 10% of its entities (same logical time)
  committed after the events; the rows whose value is not the one known at their time,
  with each store's default settings.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from revisions_assets import DatasetReader

from .data import ID, TABLE, entities, updates
from .harness import Context, Outcome, Row, fmt_seconds, measure_pair, ratio, report
from .reader import dataset
from .scenarios import new_dataset
from .training import write_events

#: the features both stores retrieve (every value column but the date and the instant)
FEATURES = ("f_amount", "f_delta", "f_count", "f_age", "f_segment", "f_code", "f_active")
EVENT_TIMESTAMP, CREATED = "event_timestamp", "created"

PEAK = """
def peak_mib():  # not ru_maxrss: it keeps the parent's peak across fork and exec
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmHWM")) / 1024
"""
READER = """
import json, polars as pl
from revisions_assets import DatasetReader
events = pl.read_parquet({events!r})
out = DatasetReader({root!r}).as_of_join(
    events, {table!r}, event_time="event_time", on=["id"], known_at="all_committed",
    columns={features!r},
)
print(json.dumps({{"rows": out.height, "peak": peak_mib()}}))
"""
READER_SINK = """
import json, polars as pl
from revisions_assets import DatasetReader
out = DatasetReader({root!r}).as_of_join(
    pl.scan_parquet({events!r}), {table!r}, event_time="event_time", on=["id"],
    known_at="all_committed", columns={features!r},
)
out.sink_parquet({sink!r})
print(json.dumps({{"rows": pl.scan_parquet({sink!r}).select(pl.len()).collect().item(),
                  "peak": peak_mib()}}))
"""
SPARK = """
import json
from revisions_assets import RevisionedDataset, build_spark_session
spark = build_spark_session(master="local[2]", conf={{"spark.ui.enabled": "false"}})
spark.sparkContext.setLogLevel("ERROR")
ds = RevisionedDataset({root!r}, spark=spark, read_only=True)
out = ds.as_of_join(
    spark.read.parquet({events!r}), {table!r}, event_time="event_time", on=["id"],
    known_at="all_committed", columns={features!r},
)
out.write.format("noop").mode("overwrite").save()
print(json.dumps({{"rows": 0, "peak": peak_mib()}}))
"""
#: ``retrieve``: FEATURES for the events in a file, through a new feature store in ``repo``
#: over ``source`` with ``offline`` as its offline store
FEAST = """
import json, pandas as pd
from datetime import timedelta
from feast import Entity, FeatureStore, FeatureView, RepoConfig, ValueType
from feast.infra.online_stores.sqlite import SqliteOnlineStoreConfig
{imports}

def retrieve(repo, offline, source, events, **options):
    config = RepoConfig(
        project="bench", provider="local", registry=repo + "/registry.db",
        offline_store=offline, repo_path=repo, entity_key_serialization_version=3,
        online_store=SqliteOnlineStoreConfig(path=repo + "/online.db"),
    )
    store = FeatureStore(config=config)
    entity = Entity(name="id", join_keys=["id"], value_type=ValueType.INT64)
    view = FeatureView(name="entities", entities=[entity], source=source, ttl=timedelta(0))
    store.apply([entity, view])
    rows = pd.read_parquet(events).rename(columns={{"event_time": "event_timestamp"}})
    features = [f"entities:{{f}}" for f in {features!r}]
    return store.get_historical_features(entity_df=rows, features=features, **options).to_df()
"""
FILE_STORE = {
    "imports": "from feast import FileSource\n"
    "from feast.infra.offline_stores.dask import DaskOfflineStoreConfig",
    "offline": "DaskOfflineStoreConfig()",
    "source": "FileSource(name='entities_file', path={path!r}, timestamp_field='event_timestamp', "
    "created_timestamp_column='created')",
}
OUR_STORE = {
    "imports": "from revisions_assets.feast import RevisionsOfflineStoreConfig, RevisionsSource",
    "offline": "RevisionsOfflineStoreConfig({config})",
    "source": "RevisionsSource(name='entities_revisions', path={path!r}, table='entities')",
}


def run_probe(code: str) -> dict:
    """Run ``code`` in a new interpreter; its last line of output, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"benchmark subprocess failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def feast_code(*stores: dict[str, str]) -> str:
    """FEAST with the imports of ``stores``."""
    imports = "\n".join(dict.fromkeys(store["imports"] for store in stores))
    return FEAST.format(imports=imports, features=FEATURES)


def retrieve_call(
    store: dict[str, str], path: str, repo: Path, events: str, *, config: str = "", **options: bool
) -> str:
    """The code of one ``retrieve`` through ``store`` over ``path``, in a new registry and
    online store at ``repo``."""
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    offline = store["offline"].format(config=config)
    source = store["source"].format(path=path)
    extra = "".join(f", {name}={value!r}" for name, value in options.items())
    return f"retrieve({str(repo)!r}, {offline}, {source}, {events!r}{extra})"


def feast_probe(store: dict[str, str], path: str, repo: Path, events: str, config: str = "") -> str:
    """The code of a fresh process retrieving FEATURES for ``events`` through ``store``."""
    call = retrieve_call(store, path, repo, events, config=config)
    return feast_code(store) + (
        f"out = {call}\nprint(json.dumps({{'rows': len(out), 'peak': peak_mib()}}))\n"
    )


def export_for_feast(reader: DatasetReader, path: Path) -> None:
    """Every revision's rows as plain Parquet: its timestamp as the event timestamp, its
    commit time as the created timestamp (what a file source of revisions holds)."""
    parts = []
    for n, revision in enumerate(reader.revisions(TABLE), start=1):
        rows = reader.changes(TABLE, since_sequence=n - 1, until_sequence=n).df
        parts.append(
            rows.select(ID, *FEATURES).with_columns(
                pl.lit(revision.timestamp).dt.cast_time_unit("us").alias(EVENT_TIMESTAMP),
                pl.lit(revision.committed_at).dt.cast_time_unit("us").alias(CREATED),
            )
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.concat(parts).write_parquet(path)


def training_sets(ctx: Context) -> Outcome:
    cfg = ctx.config
    leaked = leaks(ctx)
    ds = dataset(ctx, "s15", cfg.n, 10)
    count = max(cfg.n // 2, 1)
    events = str(ctx.folder("s15", "events"))
    write_events(ctx, ds, count, events)
    events_file = str(ctx.folder("s15", "events_file") / "events.parquet")
    # one file, for pandas; Spark wrote its instants as INT96 (naive in Polars): UTC again
    stamps = pl.col("event_time").dt.replace_time_zone("UTC").dt.cast_time_unit("us")
    pl.read_parquet(f"{events}/*.parquet").with_columns(stamps).write_parquet(events_file)
    reader = DatasetReader(ds.root)
    export = ctx.folder("s15", "export") / "entities.parquet"
    export_for_feast(reader, export)
    sink = str(ctx.folder("s15", "sink") / "joined.parquet")
    repo = ctx.folder("s15", "repo")
    args = {"root": ds.root, "table": TABLE, "events": events_file, "features": list(FEATURES)}
    probes: dict[str, list[dict]] = {}

    def probe(label: str, code: str):
        return lambda: probes.setdefault(label, []).append(run_probe(code))

    reader_code = READER.format(**args)
    fresh_reader, fresh_spark = measure_pair(
        ctx,
        ("reader as_of_join, fresh process", probe("reader", reader_code)),
        ("Spark as_of_join, fresh process", probe("spark", SPARK.format(**args))),
    )
    file_code = feast_probe(FILE_STORE, str(export), repo / "file", events_file)
    vs_reader, vs_file = measure_pair(
        ctx,
        ("reader as_of_join, fresh process", probe("reader", reader_code)),
        ("Feast file store, fresh process", probe("file", file_code)),
    )
    ours_code = feast_probe(
        OUR_STORE, ds.root, repo / "ours", events_file, config="known_at='all_committed'"
    )
    started = time.perf_counter()
    ours = run_probe(ours_code)
    ours_seconds = time.perf_counter() - started
    streamed = run_probe(READER_SINK.format(**args, sink=sink))
    rows = {label: {p["rows"] for p in runs} for label, runs in probes.items()}
    assert rows["reader"] == {count} == {ours["rows"], streamed["rows"]}, (rows, ours, streamed)
    # Feast's file store drops the entity rows that have no feature value at their time
    (file_rows,) = rows["file"]

    def peak(label: str) -> float:
        return max(p["peak"] for p in probes[label])

    common = f"E={count:,} events, N={cfg.n:,} x 11, 10 minors (p={cfg.p:.0%})"
    memory = [f"reader {peak('reader'):,.0f} MiB", f"Feast file store {peak('file'):,.0f} MiB"]
    out = [
        Row(
            "15 training set, fresh process",
            common,
            [
                f"reader {fmt_seconds(fresh_reader.median)}",
                f"Spark {fmt_seconds(fresh_spark.median)}",
            ],
            ratio(fresh_reader.median, fresh_spark.median),
            "DatasetReader.as_of_join / engine as_of_join",
            "<= 0.25",
            0.25,
            note=f"known_at='all_committed', the {len(FEATURES)} features; a new interpreter each "
            "time (Spark: session start, the join into a no-op sink; the reader: the events "
            "from Parquet, the result collected)",
        ),
        Row(
            "15 training set vs Feast, time",
            common,
            [
                f"reader {fmt_seconds(vs_reader.median)}",
                f"Feast file {fmt_seconds(vs_file.median)}",
            ],
            ratio(vs_reader.median, vs_file.median),
            "DatasetReader.as_of_join / Feast file store",
            "<= 0.5",
            0.5,
            note=f"{len(FEATURES)} features; the file store over the same rows as plain Parquet "
            "with event and created timestamps, get_historical_features(...).to_df(), "
            f"returned {file_rows:,} of the {count:,} entity rows (it drops those with no "
            "feature value at their time); RevisionsOfflineStore through FeatureStore, once: "
            f"{fmt_seconds(ours_seconds)}",
        ),
        Row(
            "15 training set vs Feast, peak memory",
            common,
            memory,
            ratio(peak("reader"), peak("file")),
            "VmHWM reader / Feast file store",
            "<= 0.5",
            0.5,
            note=f"each a fresh process; RevisionsOfflineStore through FeatureStore (pandas in "
            f"and out) {ours['peak']:,.0f} MiB; the reader with lazy events sunk to Parquet "
            f"{streamed['peak']:,.0f} MiB",
        ),
        Row(
            "15 leaked rows, default settings",
            f"{leaked['events']:,} events, a late correction of {leaked['corrected']:,} "
            "entities committed after them",
            [
                f"ours {leaked['ours']:,} (reader) / {leaked['our_store']:,} (Feast store)",
                f"Feast file store {leaked['file']:,}",
            ],
            leaked["file"] / leaked["events"],
            "Feast file store's leaked rows / events",
            "ours = 0, both reported",
            note="Feast's file store with filter_by_created_timestamp=True leaks "
            f"{leaked['file_filtered']:,}",
        ),
    ]
    for row in out:
        report(ctx, row)
    return Outcome(rows=out)


def leaks(ctx: Context) -> dict[str, int]:
    """Rows leaked by each store with its defaults: events served after a major, before a
    late correction of 10% of its entities at the major's own logical time."""
    spark, n = ctx.spark, max(ctx.config.n // 100, 200)
    ds = new_dataset(ctx, "s15_leaks", compact_after=None)
    stamp = datetime.now(UTC) - timedelta(hours=1)
    ds.commit({TABLE: entities(spark, n, 0)}, stamp, is_major=True)
    served = datetime.now(UTC)
    correction = updates(spark, n, 0.1, 1)
    ds.commit({TABLE: correction}, stamp, is_major=False)  # corrects the major, late
    folder = ctx.folder("s15_leaks", "events")
    events = str(folder / "events.parquet")
    pl.DataFrame({ID: range(n), "event_time": [served] * n}).write_parquet(events)
    reader = DatasetReader(ds.root)
    truth = reader.read(TABLE, at=1).select(ID, pl.col("f_amount").alias("truth"))

    def leaked(frame: pl.DataFrame) -> int:
        joined = frame.join(truth, on=ID, how="left")
        return joined.filter(pl.col("f_amount").ne_missing(pl.col("truth"))).height

    ours = reader.as_of_join(pl.read_parquet(events), TABLE, event_time="event_time", on=[ID])
    export = ctx.folder("s15_leaks", "export") / "entities.parquet"
    export_for_feast(reader, export)
    repo = ctx.folder("s15_leaks", "repo")
    truth.write_parquet(folder / "truth.parquet")
    retrievals = {
        "our_store": retrieve_call(OUR_STORE, ds.root, repo / "ours", events),
        "file": retrieve_call(FILE_STORE, str(export), repo / "file", events),
        "file_filtered": retrieve_call(
            FILE_STORE, str(export), repo / "filtered", events, filter_by_created_timestamp=True
        ),
    }
    counts = ", ".join(f"{name!r}: leaked({call})" for name, call in retrievals.items())
    # counts, not times or peaks: one process retrieves through the three stores
    code = feast_code(OUR_STORE, FILE_STORE) + (
        "import polars as pl\n"
        f"truth = pl.read_parquet({str(folder / 'truth.parquet')!r})\n"
        "def leaked(out):\n"
        "    got = pl.from_pandas(out[['id', 'f_amount']]).join(truth, on='id', how='left')\n"
        "    return got.filter(pl.col('f_amount').ne_missing(pl.col('truth'))).height\n"
        f"print(json.dumps({{{counts}}}))\n"
    )
    return {"events": n, "corrected": correction.count(), "ours": leaked(ours), **run_probe(code)}
