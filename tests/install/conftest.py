"""The package's wheel, built once per test process from this tree (see wheelhouse.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheelhouse import build_wheel


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))
