"""docs/guides/your-project.md, run as a user runs it, in a new environment.

The newest ``create-dagster`` (in an environment of its own, as ``uvx`` runs it) scaffolds
the project; the guide's virtual environment gets the library's wheel (built from this
tree), the project is installed with the dependencies the guide gives it, and ``pip check``
finds nothing broken. Then each command and file of the guide, in order: the scaffolds of
the two assets, of the project's resources (its Spark settings) and of its schedule, ``dg
check defs``, ``DAGSTER_HOME`` with the guide's ``dagster.yaml`` (one run at a time), and
the ``dg launch`` runs of its last step, a refused one among them. On the project's instance,
in this process: the components' checks, sensor, schedule and resources are there, a tick
requests the scoring run of the newest features, the refused run left every partition's
status and every check's result as they were, and a code bump shows as a pending major
before anything runs. Last, the Python way of step 4 loads.

The guide's ``pip install`` commands install offline from the wheelhouse
(``tests/install/wheelhouse.py``) with uv, the same requirements in seconds; ``pip check``
is pip's own."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleCauseCategory, StaleStatus
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from revisions_assets import RevisionedDataset
from revisions_assets.dagster import TAG_PENDING, TAG_REFUSED, automation_tick
from revisions_assets.dagster.pending import META_PENDING
from revisions_assets.dagster.unmaterialized import KEPT_FROM_RUN
from tests.install.wheelhouse import CREATE_DAGSTER, build_wheel, clean_env, install, tool_env

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GUIDE = (REPO / "docs" / "guides" / "your-project.md").read_text()

CREATE = "create-dagster project my-project"
VENV = "python -m venv .venv"
WHEEL = 'pip install "revisions_assets-0.1.0-py3-none-any.whl[dagster]"'
INSTALL = ["pip install -e .", "pip check"]
SCAFFOLD = [
    "dg scaffold defs revisions_assets.dagster.FeaturizedAssetComponent my_features",
    "dg scaffold defs revisions_assets.dagster.ScoringAssetComponent my_scores",
    "dg scaffold defs revisions_assets.dagster.RevisionsResourcesComponent revisions",
    "dg scaffold defs revisions_assets.dagster.FeaturizedScheduleComponent daily",
]
DEFS = Path("src/my_project/defs")
CHECK = "dg check defs"
HOME = ['export DAGSTER_HOME="$PWD/.dagster_home"', 'mkdir -p "$DAGSTER_HOME"']
LAUNCH = [
    "dg launch --assets my_features,my_scores --partition-range 2024-01-01...2024-01-02",
    "dg launch --assets my_features --partition 2024-01-03",
    "dg launch --assets my_scores --partition 2024-01-03",
]
REFUSED = "dg launch --assets my_scores --partition 2024-01-02"


def guide_block(path: str, language: str) -> str:
    """The ``language`` block the guide gives for the file ``path``."""
    found = re.search(rf"`{re.escape(path)}`:\n\n```{language}\n(.*?)```", GUIDE, re.S)
    assert found, f"the guide no longer gives {path}"
    return found.group(1)


def first_block(language: str, after: str) -> str:
    """The guide's first ``language`` block after the text ``after``."""
    found = re.search(rf"{re.escape(after)}.*?```{language}\n(.*?)```", GUIDE, re.S)
    assert found, f"the guide has no {language} block after {after!r}"
    return found.group(1)


class Shell:
    """The user's shell in the project: the guide's commands, its virtual environment active
    once made; ``pip install`` from the wheelhouse (``install``)."""

    def __init__(self, project: Path, venv: Path):
        self.project = project
        self.python = venv / "bin" / "python"
        self.env = {k: v for k, v in clean_env(venv).items() if k != "DAGSTER_HOME"}

    def run(self, command: str, *extra: str, cwd: Path | None = None) -> str:
        """``command`` as the guide writes it (``extra``: a prompt's answers)."""
        assert command in GUIDE, f"the guide no longer says {command!r}"
        program, *args = shlex.split(command)
        if program == "pip" and args[0] == "install":
            install(self.python, *args[1:], *extra, cwd=cwd or self.project)
            return ""
        executable = [str(self.python), "-m", "pip"] if program == "pip" else [program]
        done = subprocess.run(
            [*executable, *args, *extra],
            cwd=cwd or self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{command}:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr


def test_the_guide_steps_run(tmp_path, monkeypatch):
    wheel = build_wheel(tmp_path / "wheel")
    tools = tool_env(tmp_path / "tools", f"create-dagster=={CREATE_DAGSTER}")
    project = tmp_path / "my-project"
    shell = Shell(project, project / ".venv")
    shell.env["PATH"] = f"{tools}:{shell.env['PATH']}"  # uvx create-dagster
    shell.run(CREATE, "--no-uv-sync", cwd=tmp_path)  # the prompt's answer
    # the newest create-dagster pins its own Dagster, which the guide replaces
    pyproject = (project / "pyproject.toml").read_text()
    pinned = f'dependencies = [\n    "dagster=={CREATE_DAGSTER}",\n]\n'
    assert pinned in pyproject
    assert VENV in GUIDE
    subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=project, check=True)
    assert WHEEL in GUIDE and wheel.name in WHEEL, "the guide names another wheel"
    install(shell.python, f"{wheel}[dagster]")  # the guide's wheel: this tree's
    dependencies = first_block("toml", "dependencies `create-dagster` wrote")
    (project / "pyproject.toml").write_text(pyproject.replace(pinned, dependencies))
    for command in INSTALL:
        checked = shell.run(command)
    assert "No broken requirements found." in checked

    for command in SCAFFOLD:
        shell.run(command)
    revisions = project / DEFS / "revisions" / "defs.yaml"
    assert revisions.read_text() == guide_block(f"{DEFS}/revisions/defs.yaml", "yaml")
    assert "All definitions loaded successfully" in shell.run(CHECK)
    for command in HOME:
        assert command in GUIDE
    home = project / ".dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(guide_block(".dagster_home/dagster.yaml", "yaml"))
    shell.env["DAGSTER_HOME"] = str(home)
    for command in LAUNCH[:2]:
        # the guide's dagster.yaml: Dagster's warning that it found none is gone
        assert "No dagster instance configuration file" not in shell.run(command)

    # the project as dg loads it: the components' checks, sensor, executor, schedule, Spark
    monkeypatch.syspath_prepend(str(project / "src"))
    monkeypatch.chdir(project)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    defs = load_project(project)
    checks = {k.to_user_string() for c in defs.asset_checks or [] for k in c.check_keys}
    assert {"my_features:ids_unique_non_null", "my_scores:consumer_lag"} <= checks
    spark = defs.resources["revisions_spark"]
    assert spark.spark_config == {"spark.sql.shuffle.partitions": "4"} and spark.quiet_logs
    (sensor,) = defs.sensors or []
    assert sensor.name == "revisions_automation"
    assert defs.executor is dg.in_process_executor
    (schedule,) = defs.schedules or []
    assert schedule.name == "featurized_daily"
    at = datetime(2024, 1, 4, 1, tzinfo=timezone.utc)
    repository = defs.get_repository_def()
    with dg.build_schedule_context(
        scheduled_execution_time=at, repository_def=repository
    ) as context:
        (newest,) = schedule.evaluate_tick(context).run_requests or []
    assert newest.partition_key == "2024-01-03"
    assets = {a.key.to_user_string(): a for a in defs.assets or []}
    with dg.DagsterInstance.get() as instance:
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 1
        # a scoring run over another range is refused, succeeds and materializes nothing;
        # every partition and every check of the asset shows what it showed before
        scores = assets["my_scores"]
        before = shown(instance, defs, scores)
        assert "materialize 2024-01-03 instead" in shell.run(REFUSED)
        (refused,) = instance.get_runs(limit=1)
        assert refused.is_success and refused.tags[TAG_REFUSED] == "materialize 2024-01-03"
        assert shown(instance, defs, scores) == before
        kept = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [k for k in before if isinstance(k, dg.AssetCheckKey)]
        )
        assert {r.run_id for r in kept.values()} == {refused.run_id}  # reported again ...
        assert all(KEPT_FROM_RUN in r.evaluation.metadata for r in kept.values())  # ... so

        # the features of 2024-01-03 are new: a tick requests the scoring run the guide launches
        ordered = [assets["my_features"], scores]
        requests, _ = automation_tick(sensor, defs, instance, ordered)
        asked = {k.to_user_string(): r.partition_key for r in requests for k in r.asset_selection}
        assert asked == {"my_scores": "2024-01-03"}, requests
        shell.run(LAUNCH[2])
        runs = instance.get_runs()
        assert len(runs) == len(LAUNCH) + 1 and all(r.is_success for r in runs)

        # a code bump shows as a pending major before anything runs: per asset (the tag and
        # the metadata of the definition), per partition (Dagster's stale status)
        features = project / DEFS / "my_features" / "defs.yaml"
        features.write_text(features.read_text().replace("code_version: '1'", "code_version: '2'"))
        bumped = {a.key.to_user_string(): a for a in load_project(project).assets or []}
        asset = bumped["my_features"]
        assert asset.tags_by_key[asset.key][TAG_PENDING] == "major"
        why = str(asset.metadata_by_key[asset.key][META_PENDING])
        assert "'1' -> '2'" in why and "over partitions 2024-01-01...2024-01-03" in why
        assert TAG_PENDING not in bumped["my_scores"].tags_by_key[scores.key]
        stale = get_stale_status_resolver(instance, list(bumped.values()))
        for day in ("2024-01-01", "2024-01-03"):
            assert stale.get_status(asset.key, day) == StaleStatus.STALE
            (cause,) = stale.get_stale_causes(asset.key, day)
            assert cause.category == StaleCauseCategory.CODE

    # the major of both entities, then the minor of the one whose features changed (a)
    scored = RevisionedDataset(str(project / "datasets" / "my_scores")).revisions("my_scores")
    assert [(r.is_major, r.tables["my_scores"].rows) for r in scored] == [(True, 2), (False, 1)]
    features_ds = RevisionedDataset(str(project / "datasets" / "my_features"))
    assert [u.sequence for r in scored for u in r.upstream] == [
        r.sequence for r in features_ds.revisions("features")
    ]

    # step 4 the Python way: defs/resources.py instead of the component, no base_uri
    (project / DEFS / "revisions" / "defs.yaml").unlink()
    (project / DEFS / "revisions").rmdir()
    for declared in (project / DEFS).glob("*/defs.yaml"):
        declared.write_text(declared.read_text().replace("  base_uri: datasets\n", ""))
    python_way = first_block("python", "drops `base_uri` from the components")
    (project / DEFS / "resources.py").write_text(python_way)
    resources = load_project(project).resources
    assert resources["revisions_spark"].spark_config == {"spark.sql.shuffle.partitions": "4"}
    assert resources["revisions_location"].base_uri == str(project / "datasets")


def load_project(project: Path) -> dg.Definitions:
    """The project's Definitions, loaded again (a reload of the code location)."""
    for name in [m for m in sys.modules if m == "my_project" or m.startswith("my_project.")]:
        del sys.modules[name]
    return dg.load_from_defs_folder(path_within_project=project / "src" / "my_project")


def shown(
    instance: dg.DagsterInstance, defs: dg.Definitions, asset: dg.AssetsDefinition
) -> dict[object, object]:
    """What the catalog shows of a partitioned asset: each partition's status, each check's
    latest result (a partitioned check: the partitions it succeeded, failed, was skipped or
    failed to execute on), as Dagster resolves them."""
    pdef = asset.partitions_def
    keys = pdef.get_partition_keys(current_time=datetime(2024, 1, 5, tzinfo=timezone.utc))
    out: dict[object, object] = {
        "partitions": instance.get_status_by_partition(asset.key, keys, pdef)
    }
    graph = defs.resolve_asset_graph()
    storage = instance.event_log_storage
    for key in graph.asset_check_keys:
        if key.asset_key != asset.key:
            continue
        if graph.get(key).partitions_def is not None:
            subsets = storage.get_asset_check_state([(key, pdef)])[key].subsets
            out[key] = {
                status.value: sorted(subset.subset_value.get_partition_keys())
                for status, subset in subsets.items()
                if not subset.is_empty
            }
            continue
        record = storage.get_latest_asset_check_execution_by_key([key])[key]
        status = record.status
        if status == AssetCheckExecutionRecordStatus.PLANNED:  # not executed: the run says
            failed = instance.get_run_by_id(record.run_id).status == dg.DagsterRunStatus.FAILURE
            out[key] = "EXECUTION_FAILED" if failed else "SKIPPED"
        else:
            out[key] = (status.value, record.evaluation.severity.value)
    return out
