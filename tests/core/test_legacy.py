"""Importing datasets of the original layout (written here with pandas, as it wrote them)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import (
    DatasetNotEmptyError,
    DatasetNotFoundError,
    IdColumnsError,
    LegacyLayoutError,
    NoMajorRevisionError,
)
from revisions_assets.core.maintain.legacy import NaiveTimestampWarning

from .helpers import by_id, tree
from .legacy_layout import worked_example, write_legacy


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under root with a hash of its bytes (to prove the source is untouched)."""
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in tree(str(root))}


@pytest.fixture(scope="module")
def imported(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("legacy")
    src = base / "original"
    worked_example(src)
    before = fingerprint(src)
    seen = []
    with pytest.warns(NaiveTimestampWarning, match="taken in UTC"):
        ds = RevisionedDataset.import_legacy(
            src, base / "imported", spark=spark, progress=lambda rev, rec: seen.append(rev.name)
        )
    assert fingerprint(src) == before, "the import modified its source"
    assert seen == ["revision_0", "revision_2", "revision_4", "revision_6"]
    return src, ds


def test_the_worked_example_keeps_its_history(imported):
    _, ds = imported
    log = ds.inspect.log()
    assert list(log["name"]) == ["revision_0", "revision_2", "revision_4", "revision_6"]
    assert list(log["timestamp"]) == [pd.Timestamp(2020, 1, d, tz="UTC") for d in (1, 3, 5, 7)]
    assert list(log["is_major"]) == [True, False, True, False]
    assert list(log["version"]) == ["", "", "", ""]
    tables = ds.tables()
    assert sorted(tables) == ["featurizer_A", "featurizer_B"]
    assert {t.id_columns for t in tables.values()} == {("id",)}
    for table in tables:
        latest = by_id(ds.read(table), "day", "featurizer")
        assert latest == {i: (4 if i < 6 else 6, table) for i in range(4, 11)}
    as_of = by_id(ds.read("featurizer_A", as_of="2020-01-04T00:00:00Z"), "day")
    assert as_of == {i: (0 if i < 2 else 2,) for i in range(0, 7)}


def test_a_target_with_revisions_and_non_datasets_are_refused(imported, tmp_path):
    src, ds = imported
    head = ds.head_sequence
    with pytest.warns(NaiveTimestampWarning), pytest.raises(DatasetNotEmptyError, match="already"):
        RevisionedDataset.import_legacy(src, ds.root, spark=ds.spark)
    assert ds.head_sequence == head
    with pytest.raises(DatasetNotFoundError, match="no description.parquet"):
        RevisionedDataset.import_legacy(tmp_path / "nothing", tmp_path / "t1", spark=ds.spark)
    with pytest.raises(DatasetNotFoundError, match="already a revisioned dataset"):
        RevisionedDataset.import_legacy(ds.root, tmp_path / "t2", spark=ds.spark)


def test_a_root_of_the_original_layout_is_never_opened_as_a_dataset(imported, spark):
    """Opened as is it would look empty, and its description.parquet would be overwritten."""
    src, _ = imported
    before = fingerprint(src)
    for read_only in (False, True):
        with pytest.raises(LegacyLayoutError, match="original layout.*import_legacy"):
            RevisionedDataset(src, spark=spark, id_columns=["id"], read_only=read_only)
    assert fingerprint(src) == before


def test_unimportable_sources_are_refused_before_the_target_is_touched(spark, tmp_path):
    unnamed = pd.DataFrame({"x": [1, 2]}, index=[7, 8])
    write_legacy(tmp_path / "unnamed", [("r1", datetime(2020, 1, 1), True, "1", {"f": unnamed})])
    with pytest.warns(NaiveTimestampWarning), pytest.raises(IdColumnsError, match="unnamed index"):
        RevisionedDataset.import_legacy(tmp_path / "unnamed", tmp_path / "t1", spark=spark)
    ranged = pd.DataFrame({"x": [1, 2]})
    write_legacy(tmp_path / "ranged", [("r1", datetime(2020, 1, 1), True, "1", {"f": ranged})])
    with pytest.warns(NaiveTimestampWarning), pytest.raises(IdColumnsError, match="RangeIndex"):
        RevisionedDataset.import_legacy(tmp_path / "ranged", tmp_path / "t2", spark=spark)
    named = pd.DataFrame({"x": [1]}, index=pd.Index([1], name="id"))
    write_legacy(tmp_path / "minor", [("r1", datetime(2020, 1, 1), False, "1", {"f": named})])
    with pytest.warns(NaiveTimestampWarning), pytest.raises(NoMajorRevisionError, match="'r1'"):
        RevisionedDataset.import_legacy(tmp_path / "minor", tmp_path / "t3", spark=spark)
    assert not any((tmp_path / t).exists() for t in ("t1", "t2", "t3"))


def test_index_levels_named_by_id_columns_dataset_wide_majors_and_timestamps(spark, tmp_path):
    def frame(keys, value, seen):
        index = pd.MultiIndex.from_tuples(keys)  # unnamed levels: named by id_columns
        return pd.DataFrame(
            {"value": value, "seen": pd.to_datetime([seen] * len(keys))}, index=index
        )

    aware = pd.DataFrame(
        {"at": pd.to_datetime(["2020-01-01T12:00:00.123456789+02:00"])},
        index=pd.MultiIndex.from_tuples([(1, "a")]),
    )
    berlin = [
        pd.Timestamp("2020-06-01T00:00", tz="Europe/Berlin") + pd.Timedelta(days=d)
        for d in range(3)
    ]
    write_legacy(
        tmp_path / "src",
        [
            (
                "m1",
                berlin[0],
                True,
                "1",
                {"f": frame([(1, "a"), (2, "b")], 1, "2020-01-01"), "g": aware},
            ),
            (
                "n1",
                berlin[1],
                False,
                "1",
                {"f": frame([(2, "b")], 2, "2020-01-02 03:04:05.000001")},
            ),
            ("m2", berlin[2], True, "2", {"f": frame([(3, "c")], 3, "2020-01-03")}),  # no g
        ],
    )
    ds = RevisionedDataset.import_legacy(
        tmp_path / "src", tmp_path / "dst", spark=spark, id_columns=["k", "s"]
    )
    log = ds.inspect.log()
    assert list(log["timestamp"]) == [t.tz_convert("UTC") for t in berlin]  # aware: no warning
    assert list(log["version"]) == ["1", "1", "2"]
    assert ds.tables()["f"].id_columns == ("k", "s")
    old = ds.read("f", as_of=berlin[1]).select("k", "s", "value", "seen").collect()
    assert sorted(tuple(r) for r in old) == [
        (1, "a", 1, datetime(2020, 1, 1)),
        (2, "b", 2, datetime(2020, 1, 2, 3, 4, 5, 1)),  # naive data stays naive (NTZ)
    ]
    at = ds.read("g", as_of=berlin[0]).select("at").collect()[0][0]
    assert at.replace(tzinfo=UTC) == datetime(2020, 1, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert ds.read("g").count() == 0  # m2 has no folder for g: it voids g, as it did
    assert [tuple(r) for r in ds.read("f").select("k", "value").collect()] == [(3, 3)]
