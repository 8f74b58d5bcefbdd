"""The components, registered with ``dg``: scaffolded into a new project, accepted by
``dg check defs``, materialized, the revision found in the log; the project gets the checks,
the automation sensor and the executor from the components alone, and a tick of the sensor
requests the scoring runs."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from importlib.metadata import entry_points
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster.components.scaffold.scaffold import ScaffoldRequest, get_scaffolder

import revisions_assets.dagster as revisions_dagster
from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import RevisionsError
from revisions_assets.dagster import (
    FeaturizedAssetComponent,
    ReferenceAssetComponent,
    ScoringAssetComponent,
    UnknownComponentError,
    automation_tick,
    runs_with,
)
from revisions_assets.dagster.resources.address import META_REMOTE
from revisions_assets.dagster.resources.metadata import table_schema

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROJECT = "revisions_components_project"
DEFINITIONS = """from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


def test_components_are_registered_with_dg():
    (entry,) = [
        e
        for e in entry_points(group="dagster_dg_cli.registry_modules")
        if e.name == "revisions_assets"
    ]
    assert entry.value == "revisions_assets.dagster"
    for name in ("FeaturizedAssetComponent", "ReferenceAssetComponent", "ScoringAssetComponent"):
        component = getattr(revisions_dagster, name)
        assert issubclass(component, dg.Component) and issubclass(component, dg.Resolvable)


def _dg(args: list[str], root: Path) -> str:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{REPO}", "DAGSTER_HOME": str(root)}
    done = subprocess.run(
        [str(BIN / "dg"), *args], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_scaffold_check_materialize(tmp_path, monkeypatch, instance):
    root = tmp_path / "project"
    (root / PROJECT / "defs").mkdir(parents=True)
    (root / PROJECT / "__init__.py").touch()
    (root / PROJECT / "defs" / "__init__.py").touch()
    (root / PROJECT / "definitions.py").write_text(DEFINITIONS)
    (root / PROJECT / "policies.py").write_text(POLICIES_PY)
    (root / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{PROJECT}"\nversion = "0.1.0"\n\n[tool.dg]\n'
        f'directory_type = "project"\n\n[tool.dg.project]\nroot_module = "{PROJECT}"\n'
    )
    _dg(
        ["scaffold", "defs", "revisions_assets.dagster.FeaturizedAssetComponent", "my_features"],
        root,
    )
    folder = root / PROJECT / "defs" / "my_features"
    declared = yaml.safe_load((folder / "defs.yaml").read_text())
    assert declared["type"] == "revisions_assets.dagster.FeaturizedAssetComponent"
    assert (folder / "features.py").exists()
    # beside it, the other components' scaffolds and a scoring asset with a reference
    _declare(root)
    assert "All definitions loaded successfully" in _dg(["check", "defs"], root)

    # the same definitions in process (the session's Spark), one run, one revision
    monkeypatch.syspath_prepend(str(root))
    defs = dg.load_from_defs_folder(path_within_project=root / PROJECT)
    assets = {a.key.to_user_string(): a for a in defs.assets or []}
    assert set(assets) == {"my_features", "weights", "my_scores", "scores"}
    asset = assets["my_features"]
    scores = assets["scores"]
    assert set(scores.dependency_keys) == {asset.key, dg.AssetKey("weights")}
    assert "dagster/column_lineage" in scores.metadata_by_key[scores.key]
    # Dagster's policies pass through as the factories pass them
    spec = scores.get_asset_spec(scores.key)
    assert spec.freshness_policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=30))
    assert scores.op.retry_policy.max_retries == 2 and scores.op.pool == "spark"
    assert asset.automation_conditions_by_key[asset.key] is not None
    metadata = asset.metadata_by_key[asset.key]
    assert [c.name for c in table_schema(metadata["dagster/column_schema"]).columns] == [
        "entity",
        "total",
    ]
    # nothing but the components: their checks, one automation sensor, the in-process executor
    checks = {k.to_user_string() for c in defs.asset_checks or [] for k in c.check_keys}
    for key in assets:
        assert {f"{key}:ids_unique_non_null", f"{key}:log_integrity"} <= checks
    assert "my_features:partition_ids_unique_non_null" in checks
    assert {"scores:consumer_lag", "my_scores:consumer_lag"} <= checks
    (sensor,) = defs.sensors or []
    assert sensor.name == "revisions_automation"
    # the assets whose components declare an automation condition (the scaffolds do)
    assert sensor.asset_selection.resolve(defs.resolve_asset_graph()) == {
        dg.AssetKey(k) for k in ("my_features", "weights", "my_scores")
    }
    # and no default automation sensor of Dagster's beside it
    assert [s.name for s in defs.get_repository_def().sensor_defs] == [sensor.name]
    assert defs.executor is dg.in_process_executor

    # a run of the features, with the checks that run with it (as the UI runs them)
    with_it = [
        c
        for c in defs.asset_checks or []
        if runs_with(c, asset) and asset.key in {k.asset_key for k in c.check_keys}
    ]
    result = dg.materialize(
        [asset, *with_it],
        selection=dg.AssetSelection.assets(asset),
        partition_key="2024-01-01",
        resources=defs.resources,
        instance=instance,
    )
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    (revision,) = RevisionedDataset(str(root / "datasets" / "my_features")).revisions("features")
    assert revision.is_major and revision.tables["features"].rows == 2

    # one tick of the components' sensor requests the scoring run over the new revision's day
    ordered = [asset, assets["weights"], assets["my_scores"], scores]
    requests, _ = automation_tick(sensor, defs, instance, ordered)
    asked = {key.to_user_string(): r.partition_key for r in requests for key in r.asset_selection}
    assert asked == {"my_scores": "2024-01-01"}, requests  # `scores` declares no condition

    # an upstream that names no component: the error names those the project has
    scores_yaml = root / PROJECT / "defs" / "scores" / "defs.yaml"
    scores_yaml.write_text(SCORES_YAML.replace("upstream: my_features", "upstream: features"))
    with pytest.raises(Exception) as raised:
        dg.load_from_defs_folder(path_within_project=root / PROJECT)
    chain = [raised.value, *iter_causes(raised.value)]
    (unknown,) = [e for e in chain if isinstance(e, UnknownComponentError)]
    assert "upstream 'features'" in str(unknown)
    assert "my_features (FeaturizedAssetComponent), my_scores (ScoringAssetComponent)" in str(
        unknown
    )


def iter_causes(error: BaseException) -> list[BaseException]:
    """The exceptions ``error`` was raised from or during."""
    found = []
    while (error := error.__cause__ or error.__context__) is not None:
        found.append(error)
    return found


SCORE_PY = """from pyspark.sql import functions as F


def score(features, weights):
    return features.join(weights, "entity", "left").select(
        "entity", (F.col("total") * F.col("weight")).alias("score")
    )
"""
POLICIES_PY = """from datetime import timedelta

import dagster as dg


@dg.template_var
def daily_freshness() -> dg.FreshnessPolicy:
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=30))
"""
SCORES_YAML = f"""type: revisions_assets.dagster.ScoringAssetComponent
template_vars_module: {PROJECT}.policies
attributes:
  name: scores
  function: score.py:score
  upstream: my_features
  references:
    weights:
      component: weights
      join_on: {{entity: entity}}
  partitions: {{type: daily, start_date: "2024-01-01"}}
  code_version: "1"
  dataset: scores
  uses_columns: [total]
  columns: {{entity: string, score: double}}
  base_uri: datasets
  freshness_policy: "{{{{ daily_freshness }}}}"
  max_retries: 2
  pool: spark
"""


def _declare(root: Path) -> None:
    """The other two components' scaffolds (in process), and a scoring asset with a
    reference written by hand."""
    defs = root / PROJECT / "defs"
    for component, path in (
        (ReferenceAssetComponent, "weights"),
        (ScoringAssetComponent, "my_scores"),
    ):
        (defs / path).mkdir()
        scaffolder = get_scaffolder(component)
        assert isinstance(scaffolder, dg.Scaffolder)
        scaffolder.scaffold(
            ScaffoldRequest(
                type_name=f"revisions_assets.dagster.{component.__name__}",
                target_path=defs / path,
                scaffold_format="yaml",
                project_root=root,
                params=None,
            )
        )
    (defs / "scores").mkdir()
    (defs / "scores" / "defs.yaml").write_text(SCORES_YAML)
    (defs / "scores" / "score.py").write_text(SCORE_PY)


def launch_remote_features(context, job, pipes_subprocess_client):
    """A pipes=True component's function: it launches the job (never run here)."""
    return pipes_subprocess_client.run(context=context, command=["true"], extras=job.extras)


def test_a_component_with_pipes_launches_a_remote_job():
    tree = dg.ComponentTree.for_test()
    features = FeaturizedAssetComponent(
        name="remote_features",
        function=f"{__name__}:launch_remote_features",
        code_version="1",
        id_columns=["entity"],
        partitions=dg.DailyPartitionsDefinition(start_date="2024-01-01"),
        pipes=True,
    )
    (asset,) = features.build_defs(tree.load_context).assets or []
    assert asset.metadata_by_key[asset.key][META_REMOTE] == "pipes"
    assert "pipes_subprocess_client" in asset.required_resource_keys
    # a remote job reads its own sources: a source beside pipes is refused by name
    both = FeaturizedAssetComponent(**{**features.__dict__, "source": "os:getcwd"})
    with pytest.raises(RevisionsError, match="pipes=True"):
        both.build_defs(tree.load_context)
