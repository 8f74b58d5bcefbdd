"""``SourceVersion``: a code version derived from the syntax of the asset's functions (no
Spark: declaring an asset reads no data). Edits that change no syntax keep the version; any
other edit of the functions it digests (and of ``also``) changes it; a component's YAML
asks for it with ``{{ source_version() }}``."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from revisions_assets.core.errors import InvalidArgumentError
from revisions_assets.dagster import FeaturizedAssetComponent, SourceVersion, featurized_asset

pytestmark = pytest.mark.dagster

FEATURES = """
from pyspark.sql import functions as F


def helper(rows):
    return rows.where(F.col("value") > 0)


def source(spark, start, end):
    return spark.range(3).withColumnRenamed("id", "entity")


def featurize(rows, window):
    return rows.groupBy("entity").agg(F.sum("value").alias("total"))
"""
#: edits that change no syntax: a comment, blank lines, a docstring, formatting, the name
SAME = '''
from pyspark.sql import functions as F


def helper(rows):
    return rows.where(F.col("value") > 0)


def source(spark, start, end):
    """Where the rows come from."""
    return spark.range(3).withColumnRenamed(  # reformatted
        "id", "entity"
    )


def featurize(rows,   window):

    # a comment
    return rows.groupBy("entity").agg(F.sum("value").alias("total"))
'''


def module(tmp_path: Path, name: str, code: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(code))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def version(m, also=()) -> str:
    return SourceVersion(also=also).of(m.featurize, m.source)


def test_only_syntax_changes_the_version(tmp_path):
    base = module(tmp_path, "base", FEATURES)
    assert version(base).startswith("src-") and len(version(base)) == 16
    assert version(module(tmp_path, "same", SAME)) == version(base)
    renamed = module(tmp_path, "renamed", FEATURES.replace("def featurize(", "def features("))
    assert SourceVersion().of(renamed.features, renamed.source) == version(base)
    # any other edit of either function is a new version (a major)
    summed = module(tmp_path, "summed", FEATURES.replace('F.sum("value")', 'F.max("value")'))
    assert version(summed) != version(base)
    source = module(tmp_path, "source", FEATURES.replace("range(3)", "range(4)"))
    assert version(source) != version(base)
    # a helper counts only when given in ``also``
    helped = module(tmp_path, "helped", FEATURES.replace("> 0", ">= 0"))
    assert version(helped) == version(base)
    assert version(helped, [helped.helper]) != version(base, [base.helper])
    with pytest.raises(InvalidArgumentError, match="give a code version by hand"):
        SourceVersion().of(len)


def test_factories_and_components_derive_it(tmp_path, monkeypatch):
    base = module(tmp_path, "declared", FEATURES)
    monkeypatch.syspath_prepend(str(tmp_path))
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")
    asset = featurized_asset(
        id_columns=["entity"],
        partitions_def=daily,
        code_version=SourceVersion(),
        source=base.source,
    )(base.featurize)
    assert asset.code_versions_by_key[asset.key] == version(base)
    # in YAML: {{ source_version() }}, resolved by the component (its functions: a module's)
    component = FeaturizedAssetComponent.resolve_from_yaml(
        textwrap.dedent(
            """
            name: featurize
            function: declared:featurize
            source: declared:source
            id_columns: [entity]
            partitions: {type: daily, start_date: "2024-01-01"}
            code_version: "{{ source_version() }}"
            """
        ),
        scope=FeaturizedAssetComponent.get_additional_scope(),  # what a defs.yaml gets
    )
    (built,) = component.build_defs(dg.ComponentTree.for_test().load_context).assets or []
    assert built.code_versions_by_key[built.key] == version(base)
