"""``python -m revisions_assets.demo`` (``./dev.sh demo``): the demo pipeline end to end.

Local files (demo_data/datasets/), local Spark, a DAGSTER_HOME in .dagster_home/ (both in
the current folder: the repository's with ``./dev.sh demo``), so ``./dev.sh ui`` afterwards
shows the same materializations. Steps:
references, daily features as minors, scores requested by the automation sensor of
the revisions log (one run over the days they consume), a no-change round where
nothing is recomputed, a simulated code version change (one major over the range,
then the scores' reset), a field version change launched by hand for one day (its major
reports every day it covers), the checks, a compaction and a vacuum dry run, a summary.
"""

import argparse
import logging
import os
import shutil
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import functions as F

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.dagster import (
    TAG_FORCE_COMPACTION,
    SparkSessionResource,
    automation_tick,
    revisions_resources,
    runs_with,
)

from .assets import FLIGHTS, PREVIOUS_RELEASE, DemoVersions, build_demo_assets
from .automation import build_demo_vacuum_job, demo_automation_sensor
from .checks import build_demo_checks, is_partitioned

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
TABLES = [
    ("reference", "planes"),
    ("reference", "airlines"),
    ("planes", "delay_features"),
    ("scores", "delay_risk"),
]


class Demo:
    """The demo's assets, resources and instance, and how to run and report them."""

    def __init__(self, base: Path, instance: dg.DagsterInstance):
        self.base = base
        self.instance = instance
        self.spark = SparkSessionResource(app_name="revisions-assets-demo")
        self.resources = dict(revisions_resources(str(base), self.spark))
        self.cursor: str | None = None  # the automation sensor's, from tick to tick
        self.use(PREVIOUS_RELEASE)

    def use(self, versions: DemoVersions) -> None:
        self.assets = build_demo_assets(versions)
        self.checks = build_demo_checks(self.assets)

    def materialize(
        self, name: str, partition: str | None = None, tags: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        """One run of one asset, with the checks that run with its runs (as the UI runs it;
        the blocking ones among them gate the automation of its consumers)."""
        asset = self.assets[name]
        checks = [
            c
            for c in self.checks
            if runs_with(c, asset) and any(k.asset_key == asset.key for k in c.check_keys)
        ]
        result = dg.materialize(
            [FLIGHTS, *self.assets.values(), *checks],
            selection=dg.AssetSelection.assets(asset),
            partition_key=partition,
            tags=tags,
            instance=self.instance,
            resources=self.resources,
            run_config=QUIET,
        )
        what = partition or (
            f"{tags['dagster/asset_partition_range_start']}..."
            f"{tags['dagster/asset_partition_range_end']}"
            if tags and "dagster/asset_partition_range_start" in tags
            else "snapshot"
        )
        failed = [e.check_name for e in result.get_asset_check_evaluations() if not e.passed]
        mats = result.asset_materializations_for_node(asset.node_def.name)
        if not mats:
            print(f"  {name:<22} {what:<24} nothing to consume: no revision, nothing materialized")
            return None
        meta = {k: v.value for k, v in mats[0].metadata.items()}
        compacted = (
            f"; compacted: {meta['compaction_rows']} rows in {meta['compaction_files']} files"
            if meta.get("compacted")
            else ""
        )
        if meta["kind"] == "none":
            print(f"  {name:<22} {what:<24} nothing changed: no revision committed{compacted}")
        else:
            print(
                f"  {name:<22} {what:<24} {meta['kind']:<5} seq {meta['sequence']:<3} "
                f"rows {meta['rows']:<5} tombstones {meta['tombstones']:<3} ({meta['why']})"
                + (f", {meta['rows_offered']} offered" if "rows_offered" in meta else "")
                + (
                    f", re-scored {meta['rescored_entities']}"
                    if "rescored_entities" in meta
                    else ""
                )
                + compacted
                + (f"; materialized {meta['partitions']}" if "run_partitions" in meta else "")
                + (f" FAILED checks {failed}" if failed else "")
            )
        return meta

    def sense(self, sensor: dg.SensorDefinition) -> list[dg.RunRequest]:
        with dg.build_sensor_context(instance=self.instance, resources=self.resources) as ctx:
            result = sensor(ctx)
        requests = list(result.run_requests or [])
        print(f"  sensor {sensor.name}: {len(requests) or 'no'} run request(s)")
        return requests

    def automate(self) -> list[dg.RunRequest]:
        """One tick of the automation sensor (its backfills as their single runs)."""
        sensor = demo_automation_sensor(self.assets)
        defs = dg.Definitions(
            assets=[FLIGHTS, *self.assets.values()],
            asset_checks=self.checks,
            sensors=[sensor],
            resources=self.resources,
        )
        logging.disable(logging.INFO)  # the tick's evaluation log (the UI shows it)
        try:
            requests, self.cursor = automation_tick(
                sensor, defs, self.instance, list(self.assets.values()), self.cursor
            )
        finally:
            logging.disable(logging.NOTSET)
        print(f"  automation sensor: {len(requests) or 'no'} run request(s)")
        return requests

    def run_requests(self, requests: Sequence[dg.RunRequest]) -> None:
        for request in requests:
            (key,) = request.asset_selection or []
            self.materialize(key.path[-1], request.partition_key, dict(request.tags) or None)

    def revisions(self) -> int:
        return sum(
            len(RevisionedDataset(str(self.base / d)).revisions())
            for d in {d for d, _ in TABLES}
            if (self.base / d).exists()
        )

    def run_checks(self) -> None:
        """The whole-table checks (the partitioned ones ran with each materialization)."""
        whole = [c for c in self.checks if not is_partitioned(c)]
        result = dg.materialize(
            [FLIGHTS, *self.assets.values(), *whole],
            selection=dg.AssetSelection.checks(*whole),
            instance=self.instance,
            resources=self.resources,
            run_config=QUIET,
        )
        evaluations = result.get_asset_check_evaluations()
        passed = sum(e.passed for e in evaluations)
        print(f"  {passed}/{len(evaluations)} checks passed")
        for e in evaluations:
            if not e.passed:
                print(
                    f"    {e.asset_key.to_user_string()}:{e.check_name} FAILED ({e.severity.value})"
                )

    def vacuum_dry_run(self) -> None:
        """The weekly vacuum job, as a dry run that keeps nothing back by age (retain 0)."""
        job = build_demo_vacuum_job(self.assets)
        config = {"retain_days": 0, "grace_hours": 0, "dry_run": True}
        result = job.execute_in_process(
            run_config={"ops": {"revisions_vacuum_datasets": {"config": config}}, **QUIET},
            instance=self.instance,
            resources=self.resources,
        )
        for dataset, report in result.output_for_node("revisions_vacuum_datasets").items():
            consumers = ", ".join(report["consumers"]) or "none"
            print(
                f"  {dataset:<10} would remove {len(report['revisions'])} of "
                f"{report['entries']} log entries' files ({report['files']} files, "
                f"{report['bytes']} bytes); positions of consumers kept: {consumers}"
            )

    def summary(self) -> None:
        print("\nSummary")
        for dataset, table in TABLES:
            ds = RevisionedDataset(str(self.base / dataset), spark=self.spark.spark_session)
            revs = ds.revisions(table)
            majors = sum(r.is_major for r in revs)
            written = sum(r.tables[table].rows for r in revs)
            entities = ds.read(table).count()
            print(
                f"  {dataset + '/' + table:<22} {len(revs):>3} revisions ({majors} major, "
                f"{len(revs) - majors} minor), {written:>6} rows written, "
                f"{entities:>5} current entities, head version {revs[-1].version_of(table)}"
            )
        scores = RevisionedDataset(str(self.base / "scores"), spark=self.spark.spark_session)
        risk = scores.read("delay_risk")
        bands = {r["risk_band"]: r["count"] for r in risk.groupBy("risk_band").count().collect()}
        print(f"  risk bands: {bands}")
        print("  riskiest planes (at least 5 flights in 28 days):")
        top = (
            risk.filter("flights_28d >= 5")
            .orderBy(F.desc("risk"), F.desc("flights_28d"), "tailnum")
            .limit(5)
        )
        for r in top.collect():
            print(
                f"    {r['tailnum']:<7} {r['risk']:.2f} {r['airline'] or r['carrier']:<28} "
                f"{r['manufacturer'] or '?':<20} {r['flights_28d']} flights in 28 days"
            )
        # the same scores read in this process by DatasetReader (Polars): no Spark needed
        reader = DatasetReader(self.base / "scores")
        band = reader.read("delay_risk", columns=["risk_band"]).get_column("risk_band")
        print(
            f"  read without Spark: DatasetReader({str(self.base / 'scores')!r})"
            f".read('delay_risk') -> {band.len()} rows, {int((band == 'high').sum())} high risk"
        )
        home = os.environ["DAGSTER_HOME"]
        print(f"\nDatasets under {self.base}; DAGSTER_HOME={home}")
        print(f"Open the UI on the same instance: DAGSTER_HOME={home} ./dev.sh ui")


#: the demo's instance (dagster.yaml): no telemetry, one run at a time (each run starts its
#: own Spark; docs/guides/your-project.md)
INSTANCE = """\
telemetry:
  enabled: false
concurrency:
  runs:
    max_concurrent_runs: 1
"""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m revisions_assets.demo", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--days", type=int, default=6, help="days of January 2013 to run (>= 3)")
    parser.add_argument("--data", type=Path, default=Path("demo_data", "datasets"))
    parser.add_argument("--home", type=Path, default=Path(".dagster_home"))
    args = parser.parse_args(argv)
    days = [(date(2013, 1, 1) + timedelta(days=i)).isoformat() for i in range(max(args.days, 3))]

    args.home.mkdir(parents=True, exist_ok=True)
    config = args.home / "dagster.yaml"
    if not config.exists():  # one Spark run at a time, as the guide's projects run
        config.write_text(INSTANCE)
    os.environ["DAGSTER_HOME"] = str(args.home.resolve())
    shutil.rmtree(args.data, ignore_errors=True)  # a fresh start: the first runs are majors
    demo = Demo(args.data.resolve(), dg.DagsterInstance.get())
    demo.spark.spark_session.sparkContext.setLogLevel("ERROR")

    half = len(days) // 2
    print(f"1. References and the first {half} days of features (the first run is major)")
    demo.materialize("planes")
    demo.materialize("airlines")
    for day in days[:half]:
        demo.materialize("plane_delay_features", day)
    print("2. The automation sensor requests the scores of the days not scored yet")
    demo.run_requests(demo.automate())
    print(
        f"3. {len(days) - half} more days as minors (the last run also forces a compaction), "
        "then the scores consume only those (a compaction is no change for them)"
    )
    for day in days[half:]:
        compact = {TAG_FORCE_COMPACTION: "true"} if day == days[-1] else None
        demo.materialize("plane_delay_features", day, compact)
    demo.run_requests(demo.automate())

    print("4. Nothing changed: nothing is requested, recomputed or committed")
    before = demo.revisions()
    demo.automate()
    demo.materialize("planes")
    demo.materialize("plane_delay_risk", days[-1])
    print(f"  revisions before/after: {before}/{demo.revisions()}")

    print(
        "5. The current code (plane_delay_features 1 -> 2) is deployed: one major over the range;"
    )
    print("   its values are those of the minors, so the scores' soft major re-scores none")
    demo.use(DemoVersions(departure_delay="1"))
    demo.run_requests(demo.automate())
    demo.run_requests(demo.automate())

    print("6. A field-level version: mean_dep_delay_28d 1 -> 2 (the current code rounds it),")
    print(f"   launched by hand for {days[-1]} alone: the features' major re-evaluates every day")
    print("   and its run reports each one to the catalog; the scores, which do not read that")
    print("   field, re-score none")
    demo.use(DemoVersions(features="2", departure_delay="2"))
    demo.materialize("plane_delay_features", days[-1])
    demo.run_requests(demo.automate())

    print("7. Asset checks")
    demo.run_checks()
    print("8. Lifecycle: the weekly vacuum job as a dry run (retain 0: what could go at most)")
    demo.vacuum_dry_run()
    demo.summary()


if __name__ == "__main__":
    main()
