"""Fixtures of the engine tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness.processes import CrashPlan, crash_copies

from .damage import build_template


@pytest.fixture(scope="session")
def template(spark, tmp_path_factory):
    """A small committed dataset (see damage.build_template); copy it before changing it."""
    root = tmp_path_factory.mktemp("template") / "dataset"
    build_template(spark, str(root))
    return root


@pytest.fixture(scope="module")
def crashed(crash_plan: CrashPlan, spark, tmp_path_factory) -> tuple[dict[str, str], Any]:
    """``({mode: dataset root}, before)`` after killing one worker per mode at its kill point
    (harness.processes.crash_copies); the crash test module defines ``crash_plan``."""
    base = tmp_path_factory.mktemp(Path(crash_plan.worker).stem)
    return crash_copies(crash_plan, spark, base)
