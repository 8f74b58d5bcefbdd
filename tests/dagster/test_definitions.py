"""The default code location loads the way users load it: ``workspace.yaml`` (dagster) and
``[tool.dg]`` (``dg list defs``). The UI itself is checked in a browser (test_ui.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess:
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_definitions_validate_from_workspace_yaml(tmp_path):
    done = _run([str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"], tmp_path)
    assert "revisions_assets" in done.stdout + done.stderr


def test_dg_lists_the_demo_definitions(tmp_path):
    defs = json.loads(_run([str(BIN / "dg"), "list", "defs", "--json"], tmp_path).stdout)
    assets = {a["asset_key"]: a for a in defs["assets"]}
    assert set(assets) == {
        "nycflights13/flights",
        "planes",
        "airlines",
        "plane_delay_features",
        "plane_delay_risk",
    }
    assert set(assets["plane_delay_risk"]["dependency_keys"]) == {
        "plane_delay_features",
        "planes",
        "airlines",
    }
    assert assets["plane_delay_risk"]["group_name"] == "scores"
    checks: dict[str, set[str]] = {}
    for check in defs["asset_checks"]:
        checks.setdefault(check["asset_key"], set()).add(check["name"])
    whole = {"ids_unique_non_null", "log_integrity", "code_version", "compaction_due", "schema"}
    partitioned = {"partition_ids_unique_non_null", "partition_schema", "partition_freshness"}
    assert checks["plane_delay_features"] == whole | partitioned
    assert checks["plane_delay_risk"] == whole | partitioned | {"consumer_lag"}
    assert checks["planes"] == whole - {"schema"}
    # one automation-condition sensor (the two log sensors are the documented alternative),
    # and next to it the sensor of commits made outside Dagster
    assert {s["name"] for s in defs["sensors"]} == {
        "revisions_automation",
        "revisions_outside_commits",
    }
    for key in ("planes", "plane_delay_features", "plane_delay_risk"):
        assert assets[key]["automation_condition"]["label"] == "revisions_automation"
    assert {s["name"] for s in defs["schedules"]} == {"featurized_daily", "revisions_vacuum_weekly"}


def test_the_component_location_declares_what_the_factories_build():
    """The default location's defs.yaml files (components) give the same assets, checks and
    automation as the factories at the current versions: one implementation behind both."""
    import re

    from definitions import defs as declared
    from resources import datasets_root
    from revisions_assets.demo.definitions import build_definitions

    built = build_definitions(datasets_root())

    def specs(defs) -> dict[str, dict[str, object]]:
        def condition(spec) -> str:  # the same tree (the custom condition is an object)
            return re.sub(r" at 0x[0-9a-f]+", "", repr(spec.automation_condition))

        return {
            spec.key.to_user_string(): {
                **{
                    field: getattr(spec, field)
                    for field in ("code_version", "partitions_def", "group_name", "owners")
                },
                "deps": sorted(d.asset_key.to_user_string() for d in spec.deps),
                "automation_condition": condition(spec),
                # a component adds where it is declared (dagster/component_origin, …)
                "metadata": {
                    k: v
                    for k, v in spec.metadata.items()
                    if k not in ("dagster/component_origin", "dagster/code_references")
                },
            }
            for spec in defs.resolve_all_asset_specs()
        }

    def checks(defs) -> set[tuple[str, str, bool, str | None]]:
        return {
            (spec.asset_key.to_user_string(), spec.name, spec.blocking, spec.description)
            for c in defs.asset_checks
            for spec in c.check_specs
        }

    def sensors(defs) -> dict[str, set[dg.AssetKey] | None]:
        graph = defs.resolve_asset_graph()
        # a sensor with a target (the outside-commits one) has no asset selection
        return {
            s.name: s.asset_selection.resolve(graph) if s.asset_selection else None
            for s in defs.sensors
        }

    assert specs(declared) == specs(built)
    assert (
        "dagster/component_origin"
        in declared.resolve_assets_def("planes").metadata_by_key[dg.AssetKey("planes")]
    )
    # the components bring the checks (their schemas, the scores' lag bound), the sensor over
    # every revisioned asset and the in-process executor, as the factories' location adds them
    assert checks(declared) == checks(built)
    assert sensors(declared) == sensors(built)
    assert declared.executor is built.executor is dg.in_process_executor
