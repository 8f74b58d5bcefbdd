"""docs/guides/your-project.md, run as a user runs it: ``create-dagster project``, the install,
two ``dg scaffold defs``, the project's own resources (its ``spark`` and the revisions
resources on the components' location), ``dg check defs``, ``DAGSTER_HOME`` with its
``dagster.yaml`` and the ``dg launch`` runs of its last step, each command and file as the
guide writes it. Then the project, scaffolded with ``dg`` and nothing else, has its
components' checks and their automation sensor, whose tick requests the scoring run of the
newest features.

The library is already installed in this environment, so the guide's ``pip install`` of it
finds it there, and its virtual environment is this one (``python -m venv`` is not run).
The project itself is put on ``PYTHONPATH`` instead of ``pip install -e .``, which would add
it to this shared environment."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from revisions_assets import RevisionedDataset
from revisions_assets.dagster import automation_tick

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GUIDE = (REPO / "docs" / "guides" / "your-project.md").read_text()
BIN = Path(sys.executable).parent

CREATE = "create-dagster project my-project"
VENV = "python -m venv .venv"
INSTALL = 'pip install "revisions-assets[dagster]"'
SCAFFOLD = [
    "dg scaffold defs revisions_assets.dagster.FeaturizedAssetComponent my_features",
    "dg scaffold defs revisions_assets.dagster.ScoringAssetComponent my_scores",
]
RESOURCES = "src/my_project/defs/resources.py"
CHECK = "dg check defs"
HOME = ['mkdir -p "$DAGSTER_HOME"', 'touch "$DAGSTER_HOME/dagster.yaml"']
LAUNCH = [
    "dg launch --assets my_features,my_scores --partition-range 2024-01-01...2024-01-02",
    "dg launch --assets my_features --partition 2024-01-03",
    "dg launch --assets my_scores --partition 2024-01-03",
]


def guide_file(path: str) -> str:
    """The Python block the guide gives for the file ``path``."""
    found = re.search(rf"`{re.escape(path)}`:\n\n```python\n(.*?)```", GUIDE, re.S)
    assert found, f"the guide no longer gives {path}"
    return found.group(1)


def run(command: str, cwd: Path, env: dict[str, str], *extra: str) -> str:
    """``command`` as the guide writes it (``extra``: options a prompt would ask for), with
    this environment's executables."""
    assert command in GUIDE, f"the guide no longer says {command!r}"
    program, *args = shlex.split(command)
    executable = [sys.executable, "-m", "pip"] if program == "pip" else [str(BIN / program)]
    done = subprocess.run(
        [*executable, *args, *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_the_guide_steps_run(tmp_path, monkeypatch):
    assert VENV in GUIDE
    home = tmp_path / "my-project" / ".dagster_home"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DAGSTER_HOME")}
    run(CREATE, tmp_path, env, "--no-uv-sync")  # the prompt's answer
    project = tmp_path / "my-project"
    run(INSTALL, project, env)
    env["PYTHONPATH"] = str(project / "src")
    for command in SCAFFOLD:
        run(command, project, env)
    (project / RESOURCES).write_text(guide_file(RESOURCES))
    assert "All definitions loaded successfully" in run(CHECK, project, env)
    assert 'export DAGSTER_HOME="$PWD/.dagster_home"' in GUIDE
    env["DAGSTER_HOME"] = str(home)
    for command in HOME:
        assert command in GUIDE
        subprocess.run(["bash", "-c", command], cwd=project, env=env, check=True)
    *launches, last = LAUNCH
    for command in launches:
        # an empty dagster.yaml: Dagster's warning that it found none is gone
        assert "No dagster instance configuration file" not in run(command, project, env)

    # the project as dg loads it: the components' checks, sensor and executor
    monkeypatch.syspath_prepend(str(project / "src"))
    monkeypatch.chdir(project)
    defs = dg.load_from_defs_folder(path_within_project=project / "src" / "my_project")
    checks = {k.to_user_string() for c in defs.asset_checks or [] for k in c.check_keys}
    assert {"my_features:ids_unique_non_null", "my_scores:consumer_lag"} <= checks
    # the project's spark beside the revisions resources, which the components share
    assert {"spark", "revisions_spark", "revisions_location"} <= set(defs.resources or {})
    (sensor,) = defs.sensors or []
    assert sensor.name == "revisions_automation"
    assert defs.executor is dg.in_process_executor
    # the features of 2024-01-03 are new: a tick requests the scoring run the guide launches
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        assets = {a.key.to_user_string(): a for a in defs.assets or []}
        ordered = [assets["my_features"], assets["my_scores"]]
        requests, _ = automation_tick(sensor, defs, instance, ordered)
        asked = {k.to_user_string(): r.partition_key for r in requests for k in r.asset_selection}
        assert asked == {"my_scores": "2024-01-03"}, requests
        run(last, project, env)
        runs = instance.get_runs()
        assert len(runs) == len(LAUNCH) and all(r.is_success for r in runs)

    # the major of both entities, then the minor of the one whose features changed (a)
    scores = RevisionedDataset(str(project / "datasets" / "my_scores")).revisions("my_scores")
    assert [(r.is_major, r.tables["my_scores"].rows) for r in scores] == [(True, 2), (False, 1)]
    features = RevisionedDataset(str(project / "datasets" / "my_features"))
    assert [u.sequence for r in scores for u in r.upstream] == [
        r.sequence for r in features.revisions("features")
    ]
