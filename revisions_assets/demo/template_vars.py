"""What the demo's ``defs.yaml`` files render beside their literals: the code versions of
the location, and the column lists its Python code shares with them."""

import json
import os
from dataclasses import replace
from pathlib import Path

import dagster as dg

from .assets import FEATURE_COLUMNS, RISK_COLUMNS, RISK_USES, DemoVersions

#: a JSON file of DemoVersions fields that override the current code's versions; read at
#: each load, so reloading the code location picks up a change (the UI test bumps them)
VERSIONS_FILE_ENV = "REVISIONS_DEMO_VERSIONS"


@dg.template_var
def versions() -> DemoVersions:
    """The code versions: the current code's, or those the ``REVISIONS_DEMO_VERSIONS`` file
    names."""
    path = os.environ.get(VERSIONS_FILE_ENV)
    if not path:
        return DemoVersions()
    return replace(DemoVersions(), **json.loads(Path(path).read_text()))


@dg.template_var
def feature_columns() -> dict[str, str]:
    return FEATURE_COLUMNS


@dg.template_var
def risk_columns() -> dict[str, str]:
    return RISK_COLUMNS


@dg.template_var
def risk_uses() -> list[str]:
    return RISK_USES
