"""Fixtures of the engine tests."""

from __future__ import annotations

import pytest

from .damage import build_template


@pytest.fixture(scope="session")
def template(spark, tmp_path_factory):
    """A small committed dataset (see damage.build_template); copy it before changing it."""
    root = tmp_path_factory.mktemp("template") / "dataset"
    build_template(spark, str(root))
    return root
