"""Names from a log never reach Spark SQL text (issue 53, "Names from the log reach Spark SQL
text").

While ``spark.sql.variable.substitute`` is on (Spark's default), ``${...}`` anywhere in SQL
text, a string literal included, is replaced before parsing: by an environment variable
(``${env:NAME}``) or, as here, by a setting of the session, which stands for a secret. A
dataset whose revision names, table name and values hold such references, backticks,
quotes, backslashes and dots, and whose column names hold quotes, a backslash, a dollar and
braces, is read through every kind of read on Spark (and compacted, and committed to with
the row hash): every name comes back as written and the secret never appears, in rows or in
errors. Column names Spark cannot take at all (a dot, a backtick, ``${``: Hadoop's
configuration replaces it in the names Spark's Parquet reader reads) are refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from harness.dates import day
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from revisions_assets import DatasetReader, Revision, RevisionedDataset, TableWrite
from revisions_assets.cli import cli
from revisions_assets.core.errors import InvalidNameError
from revisions_assets.core.log.records import canonical_json
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.read.execute import spark_scan
from revisions_assets.core.spark_columns import column
from revisions_assets.core.storage.backends import open_storage

from .helpers import frame

#: a setting of the session stands for the secret (its name must not look like a secret's:
#: Spark would substitute its value redacted)
SETTING, SECRET = "revisions_test_phrase", "sesame-53"
#: what Spark would replace by the secret, were it SQL text
REFERENCE = "${" + SETTING + "}"
#: revision names the log may hold (the engine writes none of them): each a reference,
#: quotes, a backslash, backticks, dots
CRAFTED = ("a.b.c", 'it\'s "q" \\ `tick`', "${spark:" + SETTING + "}", REFERENCE)
#: a table name of the log (written by hand: the engine refuses it)
TABLE = "t" + REFERENCE
#: column names a commit accepts: quotes, a backslash, a dollar and braces (a dot, a
#: backtick and "${" are refused: ``spark_columns.unnameable``)
VALUE_COLUMNS = ("it's", 'say "\\"', "$ {x}")
SCHEMA = ", ".join(["id long", *(f"`{c.replace('`', '``')}` string" for c in VALUE_COLUMNS)])


def rows_of(day_number: int, ids: range) -> list[tuple]:
    return [(i, f"'{day_number}'\\", REFERENCE, f"`{i}`.{REFERENCE}") for i in ids]


def craft(root: Path, sequence_name: str, folder: str, table: str) -> None:
    """A minor named ``sequence_name`` through the log layer, its files hard-linked from
    the newest revision's into ``folder`` (a name the engine may write)."""
    log = RevisionLog(open_storage(str(root)))
    log.refresh()
    last = log.records[-1]
    write = last.tables["t"]
    (root / folder / "t").mkdir(parents=True)
    files = []
    for path in write.files:
        target = f"{folder}/t/{Path(path).name}"
        os.link(root / path, root / target)
        files.append(target)
    record = dataclasses.replace(
        last,
        name=sequence_name,
        is_major=table != "t",
        kind="",
        sequence=log.head + 1,
        timestamp=day(10 + log.head),
        tables={table: dataclasses.replace(write, files=tuple(files))},
        raw=None,
    )
    assert log.try_append(record)
    log.after_commit()


@pytest.fixture(scope="module")
def dataset(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("names") / "ds"
    ds = RevisionedDataset(str(root), spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, rows_of(0, range(6)), SCHEMA)}, day(0), True, name="r1")
    ds.commit({"t": frame(spark, rows_of(1, range(2, 4)), SCHEMA)}, day(1), False, name="r2")
    for n, name in enumerate(CRAFTED):
        craft(root, name, f"c{n}", "t")
    craft(root, "r-table", "c9", TABLE)
    return root


@pytest.fixture(autouse=True)
def secret_setting(spark):
    spark.conf.set(SETTING, SECRET)
    yield
    spark.conf.unset(SETTING)


def shown(value: object) -> str:
    return json.dumps(value, default=str)


def rows(df) -> list[dict]:
    return sorted((r.asDict() for r in df.collect()), key=shown)


def revision_of(got: list[dict]) -> dict[int, str]:
    return {row["id"]: row["_revision"] for row in got}


def test_every_read_keeps_names_as_written(dataset, spark):
    """Every kind of read on Spark; rows find their revision by map constants (up to
    ``MAP_MAX_KEYS`` files: the joins are the next test's), without SQL text."""
    ds = RevisionedDataset(str(dataset), spark)
    changes = ds.changes("t", since_sequence=1, with_revision=True)
    reset = ds.changes("t", since_sequence=0, only_changed=True)
    got = {
        "latest": rows(ds.read("t", with_revision=True)),
        "HEAD~2": rows(ds.read("t", at="HEAD~2", with_revision=True)),
        "by name": rows(ds.read("t", at=CRAFTED[2], with_revision=True)),
        "as of": rows(ds.read("t", as_of=day(12), with_revision=True)),
        "columns": rows(ds.read("t", columns=[VALUE_COLUMNS[2]], with_revision=True)),
        "filter": rows(ds.read("t", filter=column(VALUE_COLUMNS[0]) == F.lit("'1'\\"))),
        "changes": (rows(changes.df), [r.name for r in changes.revisions]),
        "reset": (rows(reset.df), rows(reset.changed) if reset.changed is not None else None),
        "history": rows(ds.history("t")),
        "table": rows(ds.read(TABLE, with_revision=True)),
    }
    assert SECRET not in shown(got)
    # the crafted minors rewrite ids 2 and 3 in turn, on the major r1
    latest = {0: "r1", 1: "r1", 2: CRAFTED[3], 3: CRAFTED[3], 4: "r1", 5: "r1"}
    assert revision_of(got["latest"]) == latest
    assert revision_of(got["HEAD~2"])[2] == CRAFTED[1]
    assert revision_of(got["by name"])[3] == CRAFTED[2]
    assert revision_of(got["as of"])[2] == CRAFTED[0]
    first = got["latest"][0]
    revision_columns = {"_revision", "_revision_timestamp", "_revision_sequence"}
    assert set(first) == {"id", *VALUE_COLUMNS, *revision_columns}
    assert first[VALUE_COLUMNS[2]] == f"`0`.{REFERENCE}"
    assert {row["id"] for row in got["filter"]} == {2, 3}
    assert got["changes"][1] == ["r2", *CRAFTED]
    assert {row["_revision"] for row in got["table"]} == {"r-table"}


def test_rows_find_their_revision_by_joins_too(dataset, spark, monkeypatch):
    """Past ``MAP_MAX_KEYS`` files, local relations joined by the file's URI, then by its
    key where the URI is spelled otherwise."""
    monkeypatch.setattr(spark_scan, "MAP_MAX_KEYS", 0)
    ds = RevisionedDataset(str(dataset), spark)
    latest = rows(ds.read("t", with_revision=True))
    changes = ds.changes("t", since_sequence=1, with_revision=True)
    assert SECRET not in shown([latest, rows(changes.df)])
    assert revision_of(latest)[2] == CRAFTED[3]
    assert {row["_revision"] for row in rows(changes.df)} == {CRAFTED[3]}
    monkeypatch.setattr(spark_scan, "_reported_uri", lambda uri: "x:" + uri)
    assert rows(ds.read("t", with_revision=True)) == latest


def test_compaction_and_commits_keep_names_as_written(dataset, spark, tmp_path, monkeypatch):
    """A compaction's rows find their revision by sequence (maps and joins); a commit's row
    hash names every column as written; the command line's ``--spark`` read prints the
    names, never the secret (the issue's ``revisions show ROOT T --with-revision --spark``)."""
    root = tmp_path / "ds"
    os.system(f"cp -al {dataset} {root}")  # immutable files: links are a copy
    ds = RevisionedDataset(str(root), spark, id_columns=["id"], compact_after=None)
    before = sorted((r.asDict() for r in ds.read("t", with_revision=True).collect()), key=shown)
    assert ds.maintenance.compact("t") is not None
    for max_keys in (spark_scan.MAP_MAX_KEYS, 0):
        monkeypatch.setattr(spark_scan, "MAP_MAX_KEYS", max_keys)
        after = sorted((r.asDict() for r in ds.read("t", with_revision=True).collect()), key=shown)
        assert after == before and SECRET not in shown(after)
    # a skip-unchanged minor compares row hashes: the unchanged row is not written
    unchanged = frame(spark, rows_of(1, range(2, 3)), SCHEMA)
    changed = frame(spark, [(9, "x", "y", "z")], SCHEMA)
    written = ds.commit(
        {"t": unchanged.unionByName(changed)}, day(40), False, skip_unchanged=True, version="v1"
    )
    assert (written.tables["t"].rows, written.tables["t"].rows_offered) == (1, 2)
    shown_rows = CliRunner().invoke(
        cli, ["show", str(root), "t", "--with-revision", "--spark", "--json"]
    )
    assert shown_rows.exit_code == 0, shown_rows.output
    assert SECRET not in shown_rows.output and REFERENCE in shown_rows.output


@pytest.mark.parametrize(
    "name, type_ddl",
    [
        ("a.b", "long"),
        ("tick`s", "long"),
        ("n${env.HOME}", "long"),
        ("nested", "struct<`${user.name}`: long>"),
    ],
)
def test_a_column_spark_cannot_name_is_refused(spark, tmp_path, name, type_ddl):
    """A dot or a backtick names a nested field or quotes; Spark's Parquet reader and writer
    pass column names through Hadoop's configuration, which replaces ``${...}``: such a
    column would be written or read under another name (nulls)."""
    ds = RevisionedDataset(str(tmp_path / "ds"), spark, id_columns=["id"])
    df = spark.createDataFrame([], f"id long, `{name.replace('`', '``')}` {type_ddl}")
    with pytest.raises(InvalidNameError, match=re.escape(f"column {name!r} holds")):
        ds.commit({"t": df.unionByName(df)}, day(0), True)
    assert not (tmp_path / "ds").exists() or not any((tmp_path / "ds").iterdir())


def test_a_logged_column_spark_cannot_read_is_named(spark, tmp_path):
    """A log written by hand may name such a column: Spark says so rather than read nulls
    (Hadoop would have put the secret setting into the name it reads); the reader, which
    passes no name through Hadoop, reads it."""
    name = "n" + REFERENCE
    root = tmp_path / "ds"
    log = RevisionLog(open_storage(str(root)))
    log.refresh()
    path = root / "r1" / "t" / "part-00000.parquet"
    path.parent.mkdir(parents=True)
    rows = pa.table({"id": pa.array([1], pa.int64()), name: ["x"], "_deleted": [False]})
    pq.write_table(rows, path)
    schema = StructType([StructField("id", LongType()), StructField(name, StringType())])
    write = TableWrite(
        ("id",),
        canonical_json(schema.jsonValue()),
        "v1",
        1,
        0,
        ("r1/t/part-00000.parquet",),
        path.stat().st_size,
    )
    record = Revision("r1", day(0), True, 1, day(0), {"t": write}, version="v1")
    assert log.try_append(record)
    assert DatasetReader(root).read("t").rows() == [(1, "x")]
    with pytest.raises(InvalidNameError, match=r"column 'n\$\{revisions_test_phrase\}' holds"):
        RevisionedDataset(str(root), spark).read("t")
