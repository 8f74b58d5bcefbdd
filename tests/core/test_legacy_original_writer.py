"""Datasets written exactly as the original ``UpdatableDataset.write_to_updatable_dataset``
wrote them import and read as the original reader read them.

The writer is emulated with pandas: ``to_parquet`` of frames whose index is the entity
(a named index, a MultiIndex, or a RangeIndex beside an id column), several
``partition_*.parquet`` files per featurizer, ``description.parquet`` built from the
records' fields with naive timestamps, numeric revision names, ties, a major without a
featurizer's folder, a revision without any data, and minors backfilled before every major.
Every read as of every revision time (and between them) is compared with a small model of
the original reader: the records with timestamp <= T, sorted by timestamp descending
(stable), cut after the first major (dataset-wide), the first row seen per entity winning;
no major among them: ``NoMajorRevisionError``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from harness.dates import day

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import NoMajorRevisionError
from revisions_assets.core.maintain.legacy import (
    EmptyRevisionWarning,
    MinorBeforeMajorWarning,
    NaiveTimestampWarning,
)

#: (name, naive timestamp, is_major, {featurizer: frame}); the description's order
Record = tuple[str, datetime, bool, dict[str, pd.DataFrame]]


#: day 0 of the original writer's records: naive timestamps, as it wrote them
ORIGINAL_EPOCH = datetime(2021, 3, 1)


def write_original(root: Path, records: list[Record]) -> None:
    """What the original writer does: a folder per revision and featurizer holding the
    frame split into ``partition_<i>.parquet`` files, then the description."""
    for name, _, _, frames in records:
        for featurizer, frame in frames.items():
            folder = root / name / featurizer
            folder.mkdir(parents=True)
            for i, start in enumerate(range(0, max(len(frame), 1), 2)):
                frame.iloc[start : start + 2].to_parquet(folder / f"partition_{i}.parquet")
    pd.DataFrame(
        [(n, t, m, "1") for n, t, m, _ in records],
        columns=["name", "timestamp", "is_major", "version"],
    ).to_parquet(root / "description.parquet")


def original_read(records: list[Record], featurizer: str, as_of: datetime) -> dict:
    """The original reader: {entity: row values} of ``featurizer`` as of ``as_of``."""
    visible = [r for r in records if r[1] <= as_of]
    ordered = sorted(visible, key=lambda r: r[1], reverse=True)  # stable: ties keep order
    cut = next((i for i, r in enumerate(ordered) if r[2]), None)
    if cut is None:
        raise NoMajorRevisionError(f"no major revision as of {as_of}")
    state: dict = {}
    for _, _, _, frames in ordered[: cut + 1]:
        frame = frames.get(featurizer)
        if frame is None:
            continue
        if isinstance(frame.index, pd.RangeIndex):  # the entity is the id column given
            frame = frame.set_index("key")
        for key, row in frame.iterrows():
            state.setdefault(key if isinstance(key, tuple) else (key,), tuple(row))
    return state


def by_index(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns).set_index("id")


def multi(rows: list[tuple[str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["site", "unit", "x"]).set_index(["site", "unit"])


def ranged(rows: list[tuple[int, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["key", "label"])  # a RangeIndex: id_columns name it


HISTORY: list[Record] = [
    # a minor backfilled before every major, the only one to write featurizer X
    (
        "20",
        day(-2, ORIGINAL_EPOCH),
        False,
        {"A": by_index(id=[1, 9], v=[-1, 90]), "X": by_index(id=[1], v=[5])},
    ),
    (
        "0",
        day(0, ORIGINAL_EPOCH),
        True,
        {
            "A": by_index(id=[1, 2, 3], v=[10, 20, 30]),
            "M": multi([("a", 1, 1.0), ("a", 2, 2.0), ("b", 1, 3.0)]),
            "R": ranged([(1, "x"), (2, "y")]),
        },
    ),
    # tied with the first major and listed after it: voided by it, so before every major too
    ("21", day(0, ORIGINAL_EPOCH), False, {"A": by_index(id=[2], v=[-2])}),
    # ties at day 1: the one listed first wins (the minor '2' over the minor '1')
    (
        "2",
        day(1, ORIGINAL_EPOCH),
        False,
        {"A": by_index(id=[2], v=[22]), "M": multi([("a", 2, 2.5)])},
    ),
    (
        "1",
        day(1, ORIGINAL_EPOCH),
        False,
        {"A": by_index(id=[2, 4], v=[21, 40]), "R": ranged([(3, "z")])},
    ),
    ("3", day(2, ORIGINAL_EPOCH), False, {}),  # a revision without any data: skipped
    # a major without R's folder (R is emptied) tied with a minor listed after it (voided)
    (
        "10",
        day(3, ORIGINAL_EPOCH),
        True,
        {"A": by_index(id=[1, 5], v=[11, 50]), "M": multi([("c", 1, 9.0)])},
    ),
    ("11", day(3, ORIGINAL_EPOCH), False, {"A": by_index(id=[6], v=[60])}),
    # a minor listed before a major of its own time: it survives the major
    ("12", day(4, ORIGINAL_EPOCH), False, {"A": by_index(id=[7], v=[70]), "R": ranged([(4, "w")])}),
    (
        "13",
        day(4, ORIGINAL_EPOCH),
        True,
        {"A": by_index(id=[1], v=[12]), "M": multi([("c", 1, 9.5)]), "R": ranged([(5, "v")])},
    ),
    # an out-of-order backfill, listed late with an early time
    ("r14", day(3.5, ORIGINAL_EPOCH), False, {"A": by_index(id=[5], v=[55])}),
]


@pytest.fixture(scope="module")
def imported(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("original")
    write_original(base / "src", HISTORY)
    with (
        pytest.warns(EmptyRevisionWarning, match="revision '3' holds no data"),
        pytest.warns(MinorBeforeMajorWarning, match="'20', '21' precede every major"),
        pytest.warns(NaiveTimestampWarning),
    ):
        RevisionedDataset.import_legacy(
            base / "src", base / "dst", spark=spark, id_columns={"R": ["key"]}
        )
    return str(base / "dst")


def outcome(read: Callable[[], dict]) -> dict | str:
    """The rows a read returns, or the error it raises."""
    try:
        return read()
    except NoMajorRevisionError:
        return "NoMajorRevisionError"


def test_every_read_equals_the_original_reader(imported):
    reader = DatasetReader(imported)
    columns = {"A": ["v"], "M": ["x"], "R": ["label"], "X": ["v"]}
    ids = {"A": ["id"], "M": ["site", "unit"], "R": ["key"], "X": ["id"]}
    times = sorted({r[1] for r in HISTORY} | {r[1] + timedelta(hours=12) for r in HISTORY})

    def engine_read(table: str, t: datetime) -> dict:
        got = reader.read(table, as_of=pd.Timestamp(t, tz="UTC"))
        return {
            tuple(r[c] for c in ids[table]): tuple(r[c] for c in columns[table])
            for r in got.iter_rows(named=True)
        }

    for table in columns:
        for t in times:
            expected = outcome(lambda: original_read(HISTORY, table, t))  # noqa: B023
            assert outcome(lambda: engine_read(table, t)) == expected, (table, t)  # noqa: B023
    assert (
        outcome(lambda: original_read(HISTORY, "A", day(-1, ORIGINAL_EPOCH)))
        == "NoMajorRevisionError"
    )
    # only a skipped minor wrote X: emptied, as it was
    assert engine_read("X", day(5, ORIGINAL_EPOCH)) == {}


def test_numeric_names_stay_visible_and_addressable(spark, imported):
    ds = RevisionedDataset(imported, spark=spark, read_only=True)
    names = [r.name for r in ds.revisions()]
    assert {"0", "1", "2", "10", "11", "12", "13", "r14"} == set(names)  # not 3, 20, 21
    # committed in time order, a tie in reverse description order
    assert names[:3] == ["0", "1", "2"]
    assert ds.revision("10").name == "10"  # a string finds the name ...
    assert ds.revision(1).name == "0"  # ... an int is a sequence
    pinned = ds.read("A", at="0").toPandas()
    assert sorted(pinned["id"]) == [1, 2, 3]
