"""DatasetReader's download cache, offline reads, erasure reaching the cache, and no JVM.

The differential property test (``test_reader_differential.py``) holds the reader's rows
to the engine's; these tests hold what the cache fetches and keeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from harness.dates import day
from harness.proc import children_of
from harness.processes import with_tests_on_path

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import (
    DatasetNotFoundError,
    InvalidArgumentError,
    NotCachedError,
    RetentionError,
)

from .helpers import frame

SCHEMA = "id long, v long"


def cached(cache: Path) -> set[str]:
    """The data files in a cache folder (its log aside)."""
    return {
        p.relative_to(cache).as_posix()
        for p in cache.rglob("*")
        if p.is_file() and p.relative_to(cache).parts[0] != "_log"
    }


@pytest.fixture
def history(spark, root) -> RevisionedDataset:
    """major d0, minors d1 and d2, a new major d3, a minor d4 (one file per revision)."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    rows = {0: [(1, 10), (2, 20)], 1: [(2, 21)], 2: [(3, 30)], 3: [(1, 13)], 4: [(4, 40)]}
    for n, data in rows.items():
        df = frame(spark, data, SCHEMA).coalesce(1)
        ds.commit({"t": df}, day(n), is_major=n in (0, 3), name=f"r{n}")
    return ds


def files_of(ds: RevisionedDataset, *names: str) -> set[str]:
    return {f for r in ds.revisions("t") if r.name in names for f in r.tables["t"].files}


def test_a_read_as_of_fetches_only_its_revisions(history, root, tmp_path):
    cache = tmp_path / "cache"
    reader = DatasetReader(root, cache_dir=cache)
    assert cached(cache) == set()  # opening fetches the log only
    got = reader.read("t", as_of=day(1)).sort("id")
    assert got.rows() == [(1, 10), (2, 21)]
    assert cached(cache) == files_of(history, "r0", "r1")  # not r2..r4: newer; nothing older
    assert reader.read("t", as_of=day(1.5)).height == 2
    assert DatasetReader(root, cache_dir=cache).read("t", as_of=day(1)).height == 2
    assert reader._cache.fetched == 2  # a cached file is never fetched again
    paths = reader.download("t")  # the latest state: the major r3 and the minor r4
    assert {p.relative_to(cache).as_posix() for p in paths} == files_of(history, "r3", "r4")
    assert cached(cache) == files_of(history, "r0", "r1", "r3", "r4")


def test_offline_reads_only_the_cache(history, root, tmp_path):
    cache = tmp_path / "cache"
    DatasetReader(root, cache_dir=cache).download("t", as_of=day(1))
    Path(root).rename(tmp_path / "gone")  # the root is unreachable
    offline = DatasetReader(root, cache_dir=cache, offline=True)
    assert offline.read("t", as_of=day(1)).sort("id").rows() == [(1, 10), (2, 21)]
    assert [r.name for r in offline.revisions("t")] == ["r0", "r1", "r2", "r3", "r4"]
    with pytest.raises(NotCachedError, match=r"data file r3/t/.*of revision 'r3' is not in the"):
        offline.read("t")
    with pytest.raises(InvalidArgumentError, match="offline=True reads only the download cache"):
        DatasetReader(root, offline=True)
    with pytest.raises(NotCachedError, match="no cached log"):
        DatasetReader(root, cache_dir=tmp_path / "empty", offline=True)
    with pytest.raises(DatasetNotFoundError, match="nothing does not exist"):
        DatasetReader(tmp_path / "gone" / "nothing")


def test_a_purge_reaches_the_cache_on_the_next_online_open(spark, history, root, tmp_path):
    cache = tmp_path / "cache"
    DatasetReader(root, cache_dir=cache).download("t")
    before = cached(cache)
    history.maintenance.purge("t", frame(spark, [(1,)], "id long"), reason="erasure request")
    reader = DatasetReader(root, cache_dir=cache)
    live = {f for r in history.revisions("t") for f in r.tables["t"].files}
    assert cached(cache) <= live and cached(cache) != before  # the purged file is gone
    for path in cached(cache):
        assert 1 not in pl.read_parquet(cache / path)["id"].to_list()
    assert 1 not in reader.read("t")["id"].to_list()


def test_retention_errors_match_the_engine(history, root):
    history.maintenance.vacuum(retain=timedelta(0), keep_majors=False)
    reader = DatasetReader(root)
    with pytest.raises(RetentionError) as engine:
        history.read("t", as_of=day(1)).collect()
    with pytest.raises(RetentionError) as ours:
        reader.read("t", as_of=day(1))
    assert str(ours.value) == str(engine.value)


NO_JVM = """
import json, os, sys
from harness.proc import children_of
from revisions_assets import DatasetReader
reader = DatasetReader(sys.argv[1])
rows = reader.read("t").height + reader.changes("t", since_sequence=1).df.height
rows += reader.history("t").height
print(json.dumps({"rows": rows, "spark": sorted(m for m in sys.modules if m.startswith("pyspark")),
                  "children": children_of(os.getpid())}))
"""


def test_the_reader_starts_no_jvm(history, root):
    done = subprocess.run(
        [sys.executable, "-c", NO_JVM, root],
        capture_output=True,
        text=True,
        check=False,
        env=with_tests_on_path(None),
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["rows"] > 0
    assert found["spark"] == [], "the reader imported PySpark"
    assert found["children"] == [], "the reader started a process (a JVM?)"


def test_a_process_ending_while_listed_is_not_a_child():
    """A process listed in /proc that ends before its stat is read (here: a pid that no
    process has) is left out, not a FileNotFoundError (the check above failed so once)."""
    gone = str(int(Path("/proc/sys/kernel/pid_max").read_text()) + 1)
    assert children_of(os.getppid(), [gone, str(os.getpid())]) == [os.getpid()]
