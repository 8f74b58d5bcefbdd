"""Bad inputs and storage damages, table-driven: each is refused with one exact RevisionsError
subclass whose message names the argument, value or file, and leaves every file of the dataset
(data, log, description.parquet) and of its surroundings exactly as it was.

Each case runs on a fresh copy of a three-revision dataset; most need no Spark job at all.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import pandas as pd
import pytest
from harness.dates import day

from revisions_assets import DatasetReader, RevisionedDataset, UpstreamPosition
from revisions_assets.core.errors import (
    ArgumentTypeError,
    CorruptFileError,
    CorruptLogError,
    DuplicateColumnError,
    DuplicateRevisionNameError,
    IdColumnsError,
    InvalidArgumentError,
    InvalidNameError,
    InvalidTimestampError,
    MissingFileError,
    NaiveTimestampError,
    PathEscapeError,
    RevisionsError,
    SchemaMismatchError,
    StorageError,
    StorageOptionsError,
    UnknownRevisionError,
)
from revisions_assets.core.log.layout import DESCRIPTION, LOG_DIR, entry_path
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.storage.backends import open_storage

from .damage import SCHEMA, TABLE, copy_dataset, data_files, entry, snapshot, write_entry
from .helpers import frame

SECRET = "wJalrXUtnFEMI/K7MDENG"
KEY_ID = "AKIAIOSFODNN7EXAMPLE"


@dataclass
class Ctx:
    spark: object
    root: Path
    outside: Path
    handle: RevisionedDataset | None = None

    def open(self, **kw) -> RevisionedDataset:
        return RevisionedDataset(str(self.root), spark=self.spark, id_columns=["id"], **kw)

    def df(self, rows=((9, "z"),), schema: str = SCHEMA):
        return frame(self.spark, list(rows), schema)

    def commit(self, tables=None, timestamp=None, is_major=False, **kw):
        tables = {TABLE: self.df()} if tables is None else tables
        return self.open().commit(tables, timestamp or day(3), is_major, **kw)


@dataclass(frozen=True)
class Case:
    id: str
    error: type[RevisionsError]
    names: tuple[str, ...]  # what the message must name
    act: Callable[[Ctx], object]
    damage: Callable[[Ctx], None] | None = None
    finding: str | None = None  # what verify() reports for the damage
    absent: tuple[str, ...] = ()  # what the message must never show
    open_first: bool = False  # open a handle before the damage (ctx.handle)


# -- damages -------------------------------------------------------------------------------


def drop(*rels: str) -> Callable[[Ctx], None]:
    def damage(c: Ctx) -> None:
        for rel in rels:
            path = c.root / rel
            shutil.rmtree(path) if path.is_dir() else path.unlink()

    return damage


def edit_entry(at: int, **fields) -> Callable[[Ctx], None]:
    def damage(c: Ctx) -> None:
        write_entry(c.root, at, {**entry(c.root, at), **fields})

    return damage


def replace_entry(sequence: int, content: object) -> Callable[[Ctx], None]:
    return lambda c: write_entry(c.root, sequence, content)


def with_files(*files: str) -> Callable[[Ctx], None]:
    def damage(c: Ctx) -> None:
        doc = entry(c.root, 3)
        doc["tables"][TABLE]["files"] = list(files)
        write_entry(c.root, 3, doc)

    return damage


def link_outside(rel: str, copy_from: str | None = None) -> Callable[[Ctx], None]:
    """Replace ``rel`` by a symlink to a copy (or an empty folder) outside the root."""

    def damage(c: Ctx) -> None:
        target = c.outside / Path(rel).name
        source = c.root / (copy_from or rel)
        if source.is_dir():
            shutil.copytree(source, target)
        elif source.exists():
            shutil.copy(source, target)
        else:
            target.mkdir()
        path = c.root / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        path.symlink_to(target)

    return damage


def dangling_next_entry(c: Ctx) -> None:
    (c.root / entry_path(4)).symlink_to(c.root / LOG_DIR / "nowhere.json")


def folder_as_next_entry(c: Ctx) -> None:
    (c.root / entry_path(4)).mkdir()


def regular_file(c: Ctx) -> None:
    (c.outside / "not-a-dir").write_text("hello")


def missing_data_file(c: Ctx) -> None:
    data_files(c.root, "r1")[0].unlink()


def not_parquet_data_file(c: Ctx) -> None:
    data_files(c.root, "r1")[0].write_bytes(b"not parquet at all, replaced outside the engine")


FIRST_FILE = "r1/t/part-"  # the prefix of r1's data file in messages


# -- the cases -------------------------------------------------------------------------------


def read(**kw):
    return lambda c: c.open().read(kw.pop("table", TABLE), **kw)


def changes(**kw):
    return lambda c: c.open().changes(kw.pop("table", TABLE), **kw)


def bad_commit(**kw):
    return lambda c: c.commit(**kw)


def with_table(name_or_schema: str, schema: str = SCHEMA, rows=((9, "z"),), **kw):
    """A commit of a table ``name_or_schema`` (or of table t with that schema)."""

    def act(c: Ctx):
        if " " in name_or_schema:  # a schema: table t
            return c.commit({TABLE: c.df(rows, name_or_schema)}, **kw)
        return c.commit({name_or_schema: c.df(rows, schema)}, is_major=True, **kw)

    return act


ID_TYPE_ROWS = {
    "map<string,int>": ({"a": 1}, "x"),
    "array<int>": ([1], "x"),
    "struct<a:int>": ((1,), "x"),
    "binary": (bytearray(b"\x01"), "x"),
    "double": (1.5, "x"),
    "float": (1.5, "x"),
}

CASES = [
    # the root
    Case("root-empty", InvalidArgumentError, ("root", "empty"), lambda c: RevisionedDataset("")),
    Case("root-blank", InvalidArgumentError, ("root", "empty"), lambda c: RevisionedDataset("  ")),
    Case("root-none", ArgumentTypeError, ("root", "None"), lambda c: RevisionedDataset(None)),
    Case("root-int", ArgumentTypeError, ("root", "int 5"), lambda c: RevisionedDataset(5)),
    Case(
        "root-regular-file",
        StorageError,
        ("not-a-dir", "regular file"),
        lambda c: RevisionedDataset(str(c.outside / "not-a-dir")),
        damage=regular_file,
    ),
    Case(
        "root-name-too-long",
        StorageError,
        ("x" * 300, "File name too long"),
        lambda c: RevisionedDataset(str(c.outside / ("x" * 300))),
    ),
    Case(
        "root-with-credentials",
        StorageOptionsError,
        ("s3://***@bucket/prefix", "storage_options"),
        lambda c: RevisionedDataset(f"s3://{KEY_ID}:{SECRET}@bucket/prefix"),
        absent=(SECRET, KEY_ID),
    ),
    Case(
        "root-with-an-access-key-only",
        StorageOptionsError,
        ("ftp://***@host/x", "embeds credentials"),
        lambda c: RevisionedDataset(f"ftp://{KEY_ID}@host/x"),
        absent=(KEY_ID,),
    ),
    Case(
        "root-unknown-scheme",
        StorageError,
        ("'ftp://host/x'", "no storage backend"),
        lambda c: RevisionedDataset("ftp://host/x"),
    ),
    Case(
        "root-file-uri-remote-host",
        InvalidArgumentError,
        ("elsewhere", "file://"),
        lambda c: RevisionedDataset("file://elsewhere/data"),
    ),
    Case(
        "storage-options-on-local-root",
        StorageOptionsError,
        ("storage_options", "endpoint_url", "local root"),
        lambda c: c.open(storage_options={"endpoint_url": "http://localhost:9000"}),
    ),
    Case(
        "storage-options-not-a-dict",
        ArgumentTypeError,
        ("storage_options", "str"),
        lambda c: c.open(storage_options="endpoint"),
    ),
    Case(
        "storage-options-on-a-storage",
        StorageOptionsError,
        ("storage options", "region_name"),
        lambda c: open_storage(open_storage(str(c.root)), region_name="x"),
    ),
    Case(
        "merge-strategy-bogus",
        InvalidArgumentError,
        ("merge_strategy", "'bogus'", "broadcast"),
        lambda c: c.open(merge_strategy="bogus"),
    ),
    Case(
        "merge-strategy-none",
        ArgumentTypeError,
        ("merge_strategy", "None"),
        lambda c: c.open(merge_strategy=None),
    ),
    Case(
        "spark-not-a-session",
        ArgumentTypeError,
        ("spark", "'local'"),
        lambda c: RevisionedDataset(str(c.root), spark="local"),
    ),
    Case(
        "id-columns-int",
        ArgumentTypeError,
        ("id_columns", "int 5"),
        lambda c: RevisionedDataset(str(c.root), id_columns=5),
    ),
    Case(
        "id-columns-not-strings",
        ArgumentTypeError,
        ("id column", "int 1"),
        lambda c: RevisionedDataset(str(c.root), id_columns=[1]),
    ),
    Case(
        "id-columns-twice",
        IdColumnsError,
        ("['id']", "twice"),
        lambda c: RevisionedDataset(str(c.root), id_columns=["id", "id"]),
    ),
    Case(
        "id-columns-empty-for-a-table",
        IdColumnsError,
        ("'t'", "at least one"),
        lambda c: RevisionedDataset(str(c.root), id_columns={TABLE: []}),
    ),
    Case(
        "id-columns-bad-table-name",
        InvalidNameError,
        ("table", "../x"),
        lambda c: RevisionedDataset(str(c.root), id_columns={"../x": ["id"]}),
    ),
    # commit: the tables argument
    Case(
        "tables-none",
        ArgumentTypeError,
        ("tables", "None"),
        lambda c: c.open().commit(None, day(3), False),
    ),
    Case("tables-list", ArgumentTypeError, ("tables", "list"), lambda c: c.commit([c.df()])),
    Case(
        "tables-bare-dataframe",
        ArgumentTypeError,
        ("bare DataFrame", "{'<table>': df}"),
        lambda c: c.commit(c.df()),
    ),
    Case(
        "tables-empty",
        InvalidArgumentError,
        ("tables", "at least one table"),
        bad_commit(tables={}),
    ),
    Case(
        "table-pandas",
        ArgumentTypeError,
        ("table 't'", "DataFrame", "spark.createDataFrame"),
        bad_commit(tables={TABLE: pd.DataFrame({"id": [1], "v": ["a"]})}),
    ),
    Case("table-none", ArgumentTypeError, ("table 't'", "None"), bad_commit(tables={TABLE: None})),
    Case(
        "table-list",
        ArgumentTypeError,
        ("table 't'", "list"),
        bad_commit(tables={TABLE: [(1, "a")]}),
    ),
    Case(
        "table-name-int",
        ArgumentTypeError,
        ("table name", "int 5"),
        lambda c: c.commit({5: c.df()}),
    ),
    Case("table-name-escapes", InvalidNameError, ("table", "'../x'", "escape"), with_table("../x")),
    Case(
        "table-name-300-chars",
        InvalidNameError,
        ("table", "300 characters", "128"),
        with_table("n" * 300),
    ),
    Case(
        "table-name-reserved", InvalidNameError, ("table", "'_log'", "reserved"), with_table("_log")
    ),
    # commit: the other arguments
    Case(
        "is-major-string", ArgumentTypeError, ("is_major", "'False'"), bad_commit(is_major="False")
    ),
    Case("is-major-int", ArgumentTypeError, ("is_major", "int 1"), bad_commit(is_major=1)),
    Case("is-major-none", ArgumentTypeError, ("is_major", "None"), bad_commit(is_major=None)),
    Case("version-int", ArgumentTypeError, ("version", "int 123"), bad_commit(version=123)),
    Case("version-list", ArgumentTypeError, ("version", "list"), bad_commit(version=["v1"])),
    Case(
        "version-dict-of-int",
        ArgumentTypeError,
        ("version['t']", "int 1"),
        bad_commit(version={TABLE: 1}),
    ),
    Case(
        "version-dict-other-table",
        InvalidArgumentError,
        ("version", "'other'", "does not write"),
        bad_commit(version={"other": "v2"}),
    ),
    Case("timestamp-int", InvalidTimestampError, ("timestamp", "int 5"), bad_commit(timestamp=5)),
    Case(
        "timestamp-none",
        InvalidTimestampError,
        ("timestamp", "None"),
        lambda c: c.open().commit({TABLE: c.df()}, None, False),
    ),
    Case(
        "timestamp-nan", InvalidTimestampError, ("timestamp", "nan"), bad_commit(timestamp=math.nan)
    ),
    Case(
        "timestamp-nat", InvalidTimestampError, ("timestamp", "NaT"), bad_commit(timestamp=pd.NaT)
    ),
    Case(
        "timestamp-nat-string",
        InvalidTimestampError,
        ("timestamp", "'NaT'"),
        bad_commit(timestamp="NaT"),
    ),
    Case(
        "timestamp-garbage",
        InvalidTimestampError,
        ("timestamp", "'yesterday-ish'"),
        bad_commit(timestamp="yesterday-ish"),
    ),
    Case(
        "timestamp-naive",
        NaiveTimestampError,
        ("timestamp", "2020-01-05", "timezone"),
        bad_commit(timestamp=datetime(2020, 1, 5)),
    ),
    Case(
        "timestamp-date",
        NaiveTimestampError,
        ("timestamp", "2020-01-05", "date"),
        bad_commit(timestamp=date(2020, 1, 5)),
    ),
    Case("name-int", ArgumentTypeError, ("revision name", "int 7"), bad_commit(name=7)),
    Case(
        "name-all-digits",
        InvalidNameError,
        ("revision name", "'3'", "all digits"),
        bad_commit(name="3"),
    ),
    Case(
        "name-300-chars",
        InvalidNameError,
        ("revision name", "300 characters"),
        bad_commit(name="n" * 300),
    ),
    Case("name-head", InvalidNameError, ("'HEAD'", "positional"), bad_commit(name="HEAD")),
    # '~' is outside [A-Za-z0-9._-]: refused by the character rule before the reserved one
    Case("name-head-n", InvalidNameError, ("revision name", "'HEAD~3'"), bad_commit(name="HEAD~3")),
    Case(
        "column-revision",
        InvalidNameError,
        ("'t'", "'_revision'", "reserved"),
        with_table("id long, v string, _revision string", rows=((9, "z", "x"),)),
    ),
    Case(
        "column-revision-sequence",
        InvalidNameError,
        ("'t'", "'_revision_sequence'", "reserved"),
        with_table("id long, v string, _revision_sequence long", rows=((9, "z", 1),)),
    ),
    Case(
        "deleted-not-boolean",
        SchemaMismatchError,
        ("'t'", "'_deleted'", "boolean", "int"),
        with_table("id long, v string, _deleted int", rows=((9, "z", 1),)),
    ),
    Case(
        "id-columns-differ-from-the-table",
        IdColumnsError,
        ("'t'", "['id']", "['v']"),
        lambda c: RevisionedDataset(str(c.root), spark=c.spark, id_columns=["v"]).commit(
            {TABLE: c.df()}, day(3), False
        ),
    ),
    Case("name-escapes", InvalidNameError, ("'../r1'", "escape"), bad_commit(name="../r1")),
    Case(
        "producer-value-int",
        ArgumentTypeError,
        ("producer['run_id']", "int 5"),
        bad_commit(producer={"run_id": 5}),
    ),
    Case(
        "properties-string",
        ArgumentTypeError,
        ("properties", "'reason'"),
        bad_commit(properties="reason"),
    ),
    Case(
        "upstream-tuples",
        ArgumentTypeError,
        ("upstream", "tuple"),
        bad_commit(upstream=[("up", "t", 1)]),
    ),
    Case("upstream-string", ArgumentTypeError, ("upstream", "str"), bad_commit(upstream="up#t")),
    Case(
        "upstream-negative",
        InvalidArgumentError,
        ("up#t", ">= 0", "-1"),
        bad_commit(upstream=[UpstreamPosition("up", "t", -1)]),
    ),
    Case(
        "expected-positions-key",
        ArgumentTypeError,
        ("expected_positions", "'up'"),
        bad_commit(expected_positions={"up": 1}),
    ),
    Case(
        "expected-positions-negative",
        InvalidArgumentError,
        ("expected_positions", "-2"),
        bad_commit(expected_positions={("up", "t"): -2}),
    ),
    # commit: columns
    *[
        Case(
            f"id-column-{t.split('<')[0]}",
            IdColumnsError,
            ("table 'm'", "id column 'id'", t.split("<")[0]),
            with_table("m", f"id {t}, v string", rows=[ID_TYPE_ROWS[t]]),
        )
        for t in ID_TYPE_ROWS
    ],
    Case(
        "floating-id-explains-why",
        IdColumnsError,
        ("NaN", "decimal"),
        with_table("m", "id double, v string", rows=[(1.0, "x")]),
    ),
    Case(
        "duplicate-columns",
        DuplicateColumnError,
        ("table 't'", "'v'", "twice"),
        lambda c: c.commit({TABLE: c.spark.createDataFrame([(9, "a", "b")], ["id", "v", "v"])}),
    ),
    Case(
        "duplicate-columns-by-case",
        DuplicateColumnError,
        ("'V'", "'v'", "case-insensitively"),
        lambda c: c.commit({TABLE: c.spark.createDataFrame([(9, "a", "b")], ["id", "v", "V"])}),
    ),
    # reads
    Case("at-float", ArgumentTypeError, ("at", "float 1.5"), read(at=1.5)),
    Case("at-bool", ArgumentTypeError, ("at", "bool True"), read(at=True)),
    Case("at-negative", InvalidArgumentError, ("at=-1", ">= 0"), read(at=-1)),
    Case("at-beyond-head", UnknownRevisionError, ("sequence 9", "1..3"), read(at=9)),
    Case("at-unknown-name", UnknownRevisionError, ("'nope'",), read(at="nope")),
    Case(
        "at-head-too-far",
        UnknownRevisionError,
        ("HEAD~7", "3 data revisions (HEAD..HEAD~2)"),
        read(at="HEAD~7"),
    ),
    Case("read-table-int", ArgumentTypeError, ("table", "int 5"), read(table=5)),
    Case("read-as-of-int", InvalidTimestampError, ("as_of", "int 5"), read(as_of=5)),
    Case(
        "read-with-revision-string",
        ArgumentTypeError,
        ("with_revision", "'yes'"),
        read(with_revision="yes"),
    ),
    Case(
        "changes-since-and-since-sequence",
        InvalidArgumentError,
        ("since_sequence=1", "not both"),
        changes(since=day(0), since_sequence=1),
    ),
    Case(
        "changes-at-and-until-sequence",
        InvalidArgumentError,
        ("until_sequence=2", "not both"),
        changes(at="r2", until_sequence=2),
    ),
    Case(
        "changes-since-after-until",
        InvalidArgumentError,
        ("since 2020-01-03", "until 2020-01-02", "swap"),
        changes(since=day(2), until=day(1)),
    ),
    Case(
        "changes-since-sequence-negative",
        InvalidArgumentError,
        ("since_sequence", "-5"),
        changes(since_sequence=-5),
    ),
    Case(
        "changes-until-sequence-negative",
        InvalidArgumentError,
        ("until_sequence", "-1"),
        changes(until_sequence=-1),
    ),
    Case(
        "changes-sequences-swapped",
        InvalidArgumentError,
        ("since_sequence 3", "until_sequence 1"),
        changes(since_sequence=3, until_sequence=1),
    ),
    Case(
        "changes-since-sequence-float",
        ArgumentTypeError,
        ("since_sequence", "float 1.5"),
        changes(since_sequence=1.5),
    ),
    Case("changes-since-nan", InvalidTimestampError, ("since", "nan"), changes(since=math.nan)),
    Case(
        "changes-until-unparsable",
        InvalidTimestampError,
        ("until", "'soon'"),
        changes(until="soon"),
    ),
    Case(
        "revision-float", ArgumentTypeError, ("at", "float 1.5"), lambda c: c.open().revision(1.5)
    ),
    Case(
        "revision-head-too-far",
        UnknownRevisionError,
        ("HEAD~9", "3"),
        lambda c: c.open().revision("HEAD~9"),
    ),
    Case(
        "revisions-table-int",
        ArgumentTypeError,
        ("table", "int 5"),
        lambda c: c.open().revisions(5),
    ),
    Case(
        "upstream-position-dataset-int",
        ArgumentTypeError,
        ("dataset", "int 5"),
        lambda c: c.open().inspect.upstream_position(5, TABLE),
    ),
    # damaged logs: refused on open, nothing rewritten
    Case(
        "log-gap",
        CorruptLogError,
        (entry_path(2), entry_path(3), "gap"),
        lambda c: c.open(),
        damage=drop(entry_path(2)),
        finding="log_gap",
    ),
    Case(
        "log-gap-then-commit",
        CorruptLogError,
        (entry_path(2), "gap"),
        lambda c: c.commit(),
        damage=drop(entry_path(2)),
        finding="log_gap",
    ),
    Case(
        "log-deleted",
        CorruptLogError,
        (DESCRIPTION, "3 revisions", "lost"),
        lambda c: c.open(),
        damage=drop(LOG_DIR),
        finding="log_missing",
    ),
    Case(
        "log-and-description-deleted",
        CorruptLogError,
        ("'r1'", "_log/ is missing"),
        lambda c: c.open(),
        damage=drop(LOG_DIR, DESCRIPTION),
        finding="log_missing",
    ),
    Case(
        "entry-a-json-list",
        CorruptLogError,
        (entry_path(3), "JSON list"),
        lambda c: c.open(),
        damage=replace_entry(3, [1, 2]),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-not-json",
        CorruptLogError,
        (entry_path(3), "not valid JSON"),
        lambda c: c.open(),
        damage=replace_entry(3, b"{broken"),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-is-major-string",
        CorruptLogError,
        (entry_path(3), "'is_major'", '"False"'),
        lambda c: c.open(),
        damage=edit_entry(3, is_major="False"),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-tables-a-list",
        CorruptLogError,
        (entry_path(2), "'tables'", "object"),
        lambda c: c.open(),
        damage=edit_entry(2, tables=[]),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-without-name",
        CorruptLogError,
        (entry_path(3), "'name'"),
        lambda c: c.open(),
        damage=edit_entry(3, name=None),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-version-int",
        CorruptLogError,
        (entry_path(3), "'version'", "123"),
        lambda c: c.open(),
        damage=edit_entry(3, version=123),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-wrong-sequence",
        CorruptLogError,
        (entry_path(3), "claims sequence 7"),
        lambda c: c.open(),
        damage=edit_entry(3, sequence=7),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-file-with-dotdot",
        CorruptLogError,
        (entry_path(3), "../../outside/x.parquet", "outside the dataset root"),
        lambda c: c.open(),
        damage=with_files("../../outside/x.parquet"),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-file-absolute",
        CorruptLogError,
        (entry_path(3), "/etc/hostname"),
        lambda c: c.open(),
        damage=with_files("/etc/hostname"),
        finding="log_entry_corrupt",
    ),
    Case(
        "entry-far-beyond-head",
        CorruptLogError,
        (entry_path(99), entry_path(4), "gap"),
        lambda c: c.open(),
        damage=replace_entry(99, b"garbage"),
        finding="log_gap",
    ),
    Case(
        "next-entry-dangling-symlink",
        StorageError,
        (entry_path(4), "dangling symbolic link"),
        lambda c: c.open(),
        damage=dangling_next_entry,
        finding="log_entry_corrupt",
    ),
    Case(
        "next-entry-dangling-symlink-under-a-committing-handle",
        StorageError,
        (entry_path(4), "dangling symbolic link"),
        lambda c: c.handle.commit({TABLE: c.df()}, timestamp=day(3), is_major=False),
        damage=dangling_next_entry,
        open_first=True,
    ),
    Case(
        "next-entry-a-folder",
        StorageError,
        (entry_path(4), "Is a directory"),
        lambda c: c.open(),
        damage=folder_as_next_entry,
        finding="log_entry_corrupt",
    ),
    # paths that leave the root
    Case(
        "log-entry-symlinked-outside",
        PathEscapeError,
        (entry_path(3), "outside the dataset root"),
        lambda c: c.open(),
        damage=link_outside(entry_path(3)),
        finding="path_escape",
    ),
    Case(
        "revision-folder-symlinked-outside",
        PathEscapeError,
        ("'evil/_claimed'", "symbolic link"),
        lambda c: c.commit(name="evil"),
        damage=link_outside("evil"),
        finding="path_escape",
    ),
    Case(
        "revision-folder-exists-with-a-table-symlinked-outside",
        DuplicateRevisionNameError,
        ("'evil'", "already exists", "'t'"),
        lambda c: c.commit(name="evil"),
        damage=lambda c: (c.root / "evil").mkdir() or link_outside("evil/t")(c),
        finding="orphan_folder",
    ),
    Case(
        "revision-folder-exists-unclaimed",
        DuplicateRevisionNameError,
        ("'evil'", "already exists", "'notes.txt'"),
        lambda c: c.commit(name="evil"),
        damage=lambda c: (
            (c.root / "evil").mkdir() or (c.root / "evil" / "notes.txt").write_text("x")
        ),
        finding="orphan_folder",
    ),
    Case(
        "table-folder-symlinked-outside",
        PathEscapeError,
        ("r3/t", "symbolic link"),
        read(),
        damage=link_outside("r3/t"),
        finding="path_escape",
    ),
    Case(
        "data-file-symlinked-outside",
        PathEscapeError,
        (FIRST_FILE, "symbolic link"),
        read(),
        damage=lambda c: link_outside(data_files(c.root, "r1")[0].relative_to(c.root).as_posix())(
            c
        ),
        finding="path_escape",
    ),
    # storage
    Case(
        "data-file-missing",
        MissingFileError,
        (FIRST_FILE, "'r1'", "table 't'", "missing"),
        read(),
        damage=missing_data_file,
        finding="missing_file",
    ),
    *[
        Case(
            f"data-file-not-parquet-{what}",
            CorruptFileError,
            (FIRST_FILE, "'r1'", "table 't'", "not a Parquet file"),
            act,
            damage=not_parquet_data_file,
            finding="corrupt_file",
        )
        for what, act in (
            ("read", read()),
            ("changes", changes(since_sequence=0)),
            ("history", lambda c: c.open().history(TABLE)),
            ("compact", lambda c: c.open().maintenance.compact(TABLE)),
            (
                "purge",
                lambda c: c.open().maintenance.purge(TABLE, c.df([(1,)], "id long"), reason="x"),
            ),
            ("reader", lambda c: DatasetReader(c.root).read(TABLE)),
        )
    ],
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused_with_a_named_cause_and_nothing_changed(case, template, spark, tmp_path):
    ctx = Ctx(spark, copy_dataset(template, tmp_path / "dataset"), tmp_path / "outside")
    ctx.outside.mkdir()
    (ctx.outside / "keep.txt").write_text("never touched")
    if case.open_first:
        ctx.handle = ctx.open()
    if case.damage:
        case.damage(ctx)
    before = snapshot(tmp_path)  # the dataset and its surroundings

    with pytest.raises(RevisionsError) as caught:
        case.act(ctx)

    error = caught.value
    assert type(error) is case.error, f"{type(error).__name__}: {error}"
    message = str(error)
    for name in case.names:
        assert name in message, f"{name!r} not in: {message}"
    for secret in case.absent:
        assert secret not in message and secret not in repr(error)
    assert snapshot(tmp_path) == before
    if case.finding:
        findings = verify(str(ctx.root))
        assert case.finding in {f.kind for f in findings}, findings
        assert snapshot(tmp_path) == before  # verify only reads


def test_the_table_is_big_enough():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
