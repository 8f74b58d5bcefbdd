"""``pip install 'revisions-assets[dagster]'``, from the built wheel, into a user's Dagster
project that has its own ``resources`` (a module, or a package: the layout of many Dagster
projects). The README's Definitions load there (``dg check defs``) and ``dg launch``
materializes a featurized and a scoring partition, in one run. (The library imports no
top-level ``resources`` anywhere: tests/test_layers.py.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from wheelhouse import REPO, fresh_env, run_in

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

PYPROJECT = """
[project]
name = "trips"
version = "0.1.0"
requires-python = ">=3.11"

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "trips"
"""
#: the project's own resources: where its data lives (any project may have such a module)
OWN_RESOURCES = '''"""This project's own resources."""

TRIPS = {trips!r}
DATASETS = {datasets!r}
'''
TRIPS = """
import sys
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq

at = lambda day, hour: datetime(2024, 1, day, hour, tzinfo=timezone.utc)
ended = [at(1, 8), at(1, 9), at(1, 23), at(2, 10)]
pq.write_table(
    pa.table(
        {
            "driver_id": [1, 1, 2, 3],
            "ended_at": pa.array(ended, pa.timestamp("us", "UTC")),
            "rating": [4.5, 5.0, 3.0, 4.0],
        }
    ),
    sys.argv[1],
)
"""
READ = """
import json, sys
from revisions_assets import DatasetReader
print(json.dumps({
    name: DatasetReader(f"{sys.argv[1]}/{name}").read(table).sort("driver_id").rows()
    for name, table in (("drivers", "features"), ("scores", "churn_risk"))
}))
"""


def readme_definitions() -> str:
    """The README's Definitions (its first Python block)."""
    return re.search(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL)[1]


def user_project(where: Path, resources: str) -> Path:
    """A dg project at ``where`` whose definitions are the README's, reading the project's
    own ``resources`` (``resources.py``, or a ``resources/`` package) for its paths."""
    project = where / "trips-project"
    (project / "trips" / "defs").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "trips" / "__init__.py").touch()
    (project / "trips" / "defs" / "__init__.py").touch()
    (project / "data" / "trips").mkdir(parents=True)
    own = OWN_RESOURCES.format(
        trips=str(project / "data" / "trips"), datasets=str(project / "revisions")
    )
    if resources == "module":
        (project / "resources.py").write_text(own)
    else:
        (project / "resources").mkdir()
        (project / "resources" / "__init__.py").write_text(own)
    code = readme_definitions()
    assert '"/data/trips"' in code and '"/data/revisions"' in code, "the README's paths moved"
    code = code.replace('"/data/trips"', "TRIPS").replace('"/data/revisions"', "DATASETS")
    definitions = "from resources import DATASETS, TRIPS  # the project's own\n" + code
    (project / "trips" / "definitions.py").write_text(definitions)
    return project


@pytest.fixture(scope="module")
def dagster_env(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("dagster") / "venv"
    fresh_env(venv, wheel, extras=("dagster",))
    return venv


def test_the_readme_definitions_load_beside_a_resources_package(dagster_env, tmp_path):
    """The ``resources/`` package layout (the launch below loads the ``resources.py`` one)."""
    project = user_project(tmp_path, "package")
    checked = run_in(dagster_env, "dg", "check", "defs", cwd=project, env=dagster_home(project))
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr


def test_a_featurized_and_a_scoring_partition_materialize(dagster_env, tmp_path):
    """As a user launches them (the project's ``resources.py`` on the path)."""
    project = user_project(tmp_path, "module")
    run_in(dagster_env, "python", "-c", TRIPS, "data/trips/part-0.parquet", cwd=project)
    # the first run of the features is a major over its partition; the scores consume it
    run_in(
        dagster_env,
        *("dg", "launch", "--assets", "driver_features,churn_risk", "--partition", "2024-01-01"),
        cwd=project,
        env={**dagster_home(project), "SPARK_MASTER": "local[1]"},
    )
    read = run_in(dagster_env, "python", "-c", READ, str(project / "revisions"), cwd=project)
    datasets = json.loads(read.stdout)
    assert datasets["drivers"] == [[1, 2, 4.75], [2, 1, 3.0]]  # trips_28d, rating_28d
    assert datasets["scores"] == [[1, 1 / 3], [2, 1 / 2]]  # risk = 1 / (1 + trips_28d)


def dagster_home(project: Path) -> dict[str, str]:
    """The project's own Dagster instance (telemetry off)."""
    home = project / ".dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return {"DAGSTER_HOME": str(home)}
