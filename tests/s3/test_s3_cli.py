"""The command line on an s3:// root: the log through the console script (no JVM), data
through the shared session's s3a connector, the endpoint from --endpoint-url."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from core.helpers import frame
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.cli import cli

pytestmark = pytest.mark.s3


def test_log_and_show_an_s3_root(s3_spark, s3_options, s3_root_factory):
    root = s3_root_factory("cli")
    ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.commit({"t": frame(s3_spark, [(1, 10), (2, 20)], "id long, v long")}, day(0), True, "v1")
    ds.commit({"t": frame(s3_spark, [(2, 21)], "id long, v long")}, day(1), False, "v1")
    endpoint = s3_options["endpoint_url"]
    credentials = {  # the standard AWS environment; no endpoint there: --endpoint-url gives it
        "AWS_ACCESS_KEY_ID": s3_options["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3_options["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": s3_options["region_name"],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | credentials
    done = subprocess.run(
        [str(Path(sys.executable).parent / "revisions"), "log", root, "--json"]
        + ["--endpoint-url", endpoint],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [(r["sequence"], r["is_major"]) for r in json.loads(done.stdout)] == [
        (1, True),
        (2, False),
    ]
    assert s3_options["aws_secret_access_key"] not in done.stdout + done.stderr

    result = CliRunner(env=credentials).invoke(
        cli, ["show", root, "t", "--json", "--endpoint-url", endpoint]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [{"id": 1, "v": 10}, {"id": 2, "v": 21}]
