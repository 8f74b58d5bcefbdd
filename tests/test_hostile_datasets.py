"""Property test: a dataset is written by an adversary, and the readers hold.

A small valid dataset (two tables, four entries, a checkpoint, the description; staged
through the log layer, no Spark) is built once per module, beside a **sacrificial folder**:
a dataset of its own whose rows, revision name and a secret-looking environment value are
distinctive. Each example copies the dataset and applies random mutations, alone and
combined, as someone with write access to the root could: log entries with fields of the
wrong type, huge or negative counts, paths with ``..``, absolute paths, pattern characters,
names with ``${env:X}``, backticks, dots, unicode or of great length; forged entries
appended with a correct chain digest; symlinks out of the root (a data file, its folders,
an entry, ``_log/`` itself); forged or garbage checkpoints, ``_last_checkpoint`` and
``description.parquet``; data files truncated, replaced by other bytes, other row counts or
another schema. Then every entry point that needs no Spark runs on the copy: the Polars
``DatasetReader`` (open, ``read``, ``scan``, ``changes``, ``history``, ``download`` into a
cache), ``verify`` and the ``revisions`` commands in-process (``log``, ``tables``,
``describe``, ``show``, ``diff``, ``history``, ``verify``, ``lag``, ``vacuum``). Each
outcome is a result or a ``RevisionsError`` (the command line: exit 0-3, one line, never an
"unexpected" error); no output holds a row, a name or the secret of the sacrificial
folder; nothing outside the copy (and the reader's cache) is written, and the sacrificial
folder is byte for byte what it was. One case runs the console script as a subprocess.

Memory: the mutations here decode a few KB at most. Files that expand to gigabytes are
covered in fresh processes measured by VmHWM: checkpoints and descriptions in
tests/test_log_format.py, a data file claiming 50M rows in tests/cli/test_damaged_files.py,
and oversized files where a few bytes are expected (entries, ``_last_checkpoint``,
``description.parquet``, sparse files of gigabytes) below, in ``test_oversized_*``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from core.helpers import stage_revision
from harness.dates import day
from harness.examples import examples
from harness.processes import run_measuring_peak
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from revisions_assets import DatasetReader
from revisions_assets.cli import common
from revisions_assets.cli.app import cli
from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.log.file_stats import read_file_stats
from revisions_assets.core.log.layout import (
    DESCRIPTION,
    LAST_CHECKPOINT,
    checkpoint_path,
    entry_path,
)
from revisions_assets.core.log.records import canonical_json, load_json
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.storage.base import LocalStorage

#: the environment variable a hostile name points at (``${env:…}``), and its value
SECRET_VAR = "REVISIONS_HOSTILE_SECRET"
SECRET = "AKIAHOSTILE0SECRET0VALUE"
#: the sacrificial dataset: its revision's name, its rows' ids and values
SECRET_REVISION = "SECRETREV"
SECRET_IDS = range(987650, 987655)
SECRET_VALUE = 31337000
#: what no output may hold: the sacrificial rows' values, its revision's name (unless the
#: mutated log names it itself, in a forged path), the secret
MARKERS = (str(SECRET_VALUE)[:7], SECRET_REVISION, SECRET)
#: the copy's data files: (revision, table); each holds 5 rows, as the sacrificial file
DATA = [("r0", "t"), ("r1", "t"), ("u0", "u"), ("r3", "t")]
FILE = "part-00000.parquet"
HEAD = len(DATA)
CHECKPOINT = 2  # entries 1-2 are read from the checkpoint, 3-4 from their files
#: ids the copy's files hold: every id a read of the copy may return
OWN_IDS = set(range(0, 20)) | set(range(100, 105))


def build(base: Path) -> None:
    """The dataset (``base/ds``) and the sacrificial one beside it (``base/secret``)."""
    root = str(base / "ds")
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "r0", day(0), True, {(i,): {"v": i} for i in range(5)})
    r1 = {(3,): {"v": 30}, (4,): None, (5,): {"v": 5}, (6,): {"v": 6}, (7,): {"v": 7}}
    stage_revision(log, root, "r1", day(1), False, r1)
    log.write_checkpoint(CHECKPOINT)
    stage_revision(log, root, "u0", day(2), True, {(i,): {"v": i} for i in range(100, 105)}, "u")
    stage_revision(log, root, "r3", day(3), False, {(i,): {"v": i} for i in range(10, 15)})
    log.after_commit()
    secret = str(base / "secret")
    secret_log = RevisionLog(open_storage(secret))
    rows = {(i,): {"v": SECRET_VALUE + n} for n, i in enumerate(SECRET_IDS)}
    stage_revision(secret_log, secret, SECRET_REVISION, day(0), True, rows)
    secret_log.after_commit()


@dataclass(frozen=True)
class Base:
    folder: Path  #: holds ds/ and secret/
    #: the sacrificial data file's stats, as a forged entry would record them
    secret_stats: dict

    @property
    def ds(self) -> Path:
        return self.folder / "ds"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Iterator[Base]:
    folder = tmp_path_factory.mktemp("hostile")
    build(folder)
    path = f"{SECRET_REVISION}/t/{FILE}"
    (stats,) = read_file_stats(
        LocalStorage(folder / "secret"), [path], ("id",), stored_schema(folder / "ds")
    )
    doc = stats.to_doc(["long"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET_VAR, SECRET)
        yield Base(folder, doc)


def stored_schema(root: Path) -> str:
    doc = json.loads((root / entry_path(1)).read_text())
    return canonical_json(doc["tables"]["t"]["schema"])


def digest(folder: Path) -> dict[str, str]:
    """Every file and link below ``folder``: its bytes' digest (a link: its target)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[rel] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


# -- mutations -------------------------------------------------------------------------------

#: values of the wrong type, or of the right type and absurd
WRONG_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([-1, -(2**63), 2**63, 2**64 + 1, 10**30, 1.5, float("inf"), float("nan")]),
    st.integers(),
    st.text(max_size=12),
    st.just("x" * 70_000),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
#: names a hostile log may give a table, a column or an id column
HOSTILE_NAMES = st.one_of(
    st.sampled_from(
        [
            f"${{env:{SECRET_VAR}}}",
            "${env:HOME}",
            "a`b",
            "`t`",
            "a.b",
            "..",
            "../secret",
            "_log",
            "",
            " ",
            "t\u202ex",  # right-to-left override
            "é" * 64,
            "x" * 5000,
            "t\x00",
            "t/../u",
            "*",
            "t; DROP TABLE t",
            "id",  # an id column named as a table, a column twice
            "u",
        ]
    ),
    st.text(min_size=1, max_size=8),
)
#: data file paths a hostile entry may record (relative to the root; ``{secret}`` becomes
#: the sacrificial folder's absolute path)
HOSTILE_PATHS = [
    f"../secret/{SECRET_REVISION}/t/{FILE}",
    f"r0/../../secret/{SECRET_REVISION}/t/{FILE}",
    f"{{secret}}/{SECRET_REVISION}/t/{FILE}",
    f"file://{{secret}}/{SECRET_REVISION}/t/{FILE}",
    "r0/t/part-*.parquet",
    "r?/t/part-00000.parquet",
    "r[0]/t/part-00000.parquet",
    "{r0,r1}/t/part-00000.parquet",
    "r0\\t\\part-00000.parquet",
    "r0/t/",
    "",
    ".",
    "_log/00000000000000000001.json",
    "description.parquet",
    "r0/t/part-00000.parquet\x00.txt",
    "s3://bucket/secret.parquet",
    "~/secret.parquet",
    "r0//t/./part-00000.parquet",
    "r1/t/part-00000.parquet",  # another entry's file, inside the root
    "linked/part-00000.parquet",  # a symlink the mutation places, to the sacrificial file
]

entries = st.integers(min_value=1, max_value=HEAD)
data_files = st.integers(min_value=0, max_value=len(DATA) - 1)
TOP_FIELDS = [
    "sequence",
    "name",
    "timestamp_us",
    "committed_at_us",
    "is_major",
    "kind",
    "tables",
    "format",
    "previous_sha256",
    "upstream",
    "version",
    "producer",
    "properties",
    "data_change",
]
TABLE_FIELDS = [
    "rows",
    "tombstones",
    "bytes",
    "files",
    "id_columns",
    "schema",
    "file_stats",
    "version",
]
STATS_FIELDS = ["rows", "bytes", "footer_offset", "footer_length", "footer_sha256", "id_min"]

MUTATIONS = st.one_of(
    st.tuples(st.just("entry field"), entries, st.sampled_from(TOP_FIELDS), WRONG_VALUES),
    st.tuples(st.just("table field"), entries, st.sampled_from(TABLE_FIELDS), WRONG_VALUES),
    st.tuples(st.just("stats field"), entries, st.sampled_from(STATS_FIELDS), WRONG_VALUES),
    st.tuples(st.just("drop field"), entries, st.sampled_from(TOP_FIELDS + ["tables.*"])),
    st.tuples(
        st.just("path"), entries, st.sampled_from(HOSTILE_PATHS), st.booleans()
    ),  # bool: append as a forged entry (correct digest) rather than rewrite in place
    st.tuples(
        st.just("name"), entries, st.sampled_from(["table", "column", "id column"]), HOSTILE_NAMES
    ),
    st.tuples(
        st.just("raw entry"),
        entries,
        st.sampled_from(["garbage", "truncate", "empty", "null", "deep", "list", "utf16"]),
    ),
    st.tuples(st.just("upstream"), st.sampled_from(["../secret", "{secret}", "/", "s3://b/x"])),
    st.tuples(
        st.just("link"),
        st.sampled_from(["data file", "table folder", "revision folder", "entry", "log", "hint"]),
        data_files,
    ),
    st.tuples(
        st.just("checkpoint"),
        st.sampled_from(
            ["garbage", "truncate", "escape", "huge rows", "other file", "delete", "many rows"]
        ),
    ),
    st.tuples(
        st.just("hint"),
        st.sampled_from(
            [
                b"garbage",
                b"",
                b'{"sequence": 1000000000000000000000000000000}',
                b'{"sequence": -1}',
                b'{"sequence": "../../secret"}',
                b'{"sequence": 4}',
                b'{"sequence": 1}',
                b'{"sequence": 2.0}',
                b'{"sequence": true}',
                b"[" * 5000,
                b"[" * 1020,  # deeper than Python's recursion limit, shorter than the cap
                b" " * 2000 + b'{"sequence": 2}',
            ]
        ),
    ),
    st.tuples(
        st.just("description"),
        st.sampled_from(["garbage", "truncate", "other file", "delete", "many rows", "past head"]),
    ),
    st.tuples(
        st.just("data file"),
        data_files,
        st.sampled_from(
            ["truncate", "garbage", "empty", "other file", "more rows", "other schema", "no id"]
        ),
    ),
)


def rewrite_entry(root: Path, sequence: int, edit) -> None:
    path = root / entry_path(sequence)
    if not path.is_file() or path.is_symlink():
        return
    try:
        doc = load_json(path.read_bytes())
    except ValueError:
        return  # an earlier mutation made it no JSON
    if not isinstance(doc, dict):
        return
    edit(doc)
    path.write_text(json.dumps(doc, sort_keys=True))


def first_table(doc: dict) -> dict | None:
    tables = doc.get("tables")
    if isinstance(tables, dict) and tables:
        table = next(iter(tables.values()))
        return table if isinstance(table, dict) else None
    return None


def append_forged(root: Path, edit) -> None:
    """A forged entry after the newest, as a writer with access commits one: a copy of the
    newest entry, edited, with the digest of the entry before it (the chain holds)."""
    head = max(int(p.stem) for p in (root / "_log").glob("*.json") if p.stem.isdigit())
    previous = (root / entry_path(head)).read_bytes()
    try:
        doc = load_json(previous)
    except ValueError:
        return
    if not isinstance(doc, dict):
        return
    doc.update(sequence=head + 1, name=f"forged{head + 1}", kind="minor", is_major=False)
    doc["previous_sha256"] = hashlib.sha256(previous).hexdigest()
    edit(doc)
    (root / entry_path(head + 1)).write_text(canonical_json(doc))


def replace_file(target: Path, data: bytes) -> None:
    if target.is_symlink():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def link(path: Path, target: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(os.path.relpath(target, path.parent))


def mutate(base: Base, root: Path, mutation: tuple) -> None:  # noqa: C901 (one case per kind)
    """Apply one mutation to the copy at ``root`` (the sacrificial folder: ``root/../secret``)."""
    secret = root.parent / "secret"
    kind = mutation[0]
    if kind == "entry field":
        _, seq, field, value = mutation
        rewrite_entry(root, seq, lambda d: d.__setitem__(field, value))
    elif kind == "table field":
        _, seq, field, value = mutation
        rewrite_entry(root, seq, lambda d: (first_table(d) or {}).__setitem__(field, value))
    elif kind == "stats field":
        _, seq, field, value = mutation

        def edit_stats(doc):
            stats = (first_table(doc) or {}).get("file_stats")
            if isinstance(stats, list) and stats and isinstance(stats[0], dict):
                stats[0][field] = value

        rewrite_entry(root, seq, edit_stats)
    elif kind == "drop field":
        _, seq, field = mutation
        if field == "tables.*":
            rewrite_entry(root, seq, lambda d: (first_table(d) or {}).clear())
        else:
            rewrite_entry(root, seq, lambda d: d.pop(field, None))
    elif kind == "path":
        _, seq, path, forged = mutation
        path = path.replace("{secret}", str(secret))
        if path.startswith("linked/"):
            link(root / "linked", secret / SECRET_REVISION / "t")

        def edit_path(doc):
            table = first_table(doc)
            if table is None:
                return
            table.update(files=[path], rows=5, tombstones=0)
            if isinstance(table.get("file_stats"), list):
                table["file_stats"] = [dict(base.secret_stats)]

        if forged:
            append_forged(root, edit_path)
        else:
            rewrite_entry(root, seq, edit_path)
    elif kind == "name":
        _, seq, what, name = mutation

        def edit_name(doc):
            tables = doc.get("tables")
            if not isinstance(tables, dict) or not tables:
                return
            key = next(iter(tables))
            table = tables[key]
            if what == "table":
                tables[name] = tables.pop(key)
            elif not isinstance(table, dict):
                return
            elif what == "id column":
                table["id_columns"] = [name]
            elif isinstance(table.get("schema"), dict):
                fields = table["schema"].get("fields")
                if isinstance(fields, list) and fields and isinstance(fields[-1], dict):
                    fields[-1]["name"] = name

        rewrite_entry(root, seq, edit_name)
    elif kind == "raw entry":
        _, seq, how = mutation
        path = root / entry_path(seq)
        raw = path.read_bytes() if path.is_file() else b"{}"
        replace_file(
            path,
            {
                "garbage": bytes((b * 7 + 13) % 256 for b in raw),
                "truncate": raw[: len(raw) // 2],
                "empty": b"",
                "null": b"null",
                "deep": b"[" * 100_000 + b"]" * 100_000,
                "list": b"[1, 2, 3]",
                "utf16": raw.decode("utf-8", "replace").encode("utf-16"),
            }[how],
        )
    elif kind == "upstream":
        _, where = mutation
        upstream = where.replace("{secret}", str(secret))
        append_forged(
            root,
            lambda d: d.update(
                upstream=[{"dataset": upstream, "table": "t", "sequence": 1}],
                tables={},
                kind="minor",
            ),
        )
    elif kind == "link":
        _, what, n = mutation
        revision, table = DATA[n]
        if what == "data file":
            link(root / revision / table / FILE, secret / SECRET_REVISION / "t" / FILE)
        elif what == "table folder":
            link(root / revision / table, secret / SECRET_REVISION / "t")
        elif what == "revision folder":
            link(root / revision, secret / SECRET_REVISION)
        elif what == "entry":
            link(root / entry_path(HEAD if n == 0 else n), secret / entry_path(1))
        elif what == "log":
            link(root / "_log", secret / "_log")
        else:
            link(root / LAST_CHECKPOINT, secret / entry_path(1))
    elif kind == "checkpoint":
        _, how = mutation
        path = root / checkpoint_path(CHECKPOINT)
        if not path.is_file() or path.is_symlink():
            return
        raw = path.read_bytes()
        if how == "garbage":
            replace_file(path, bytes((b * 7 + 13) % 256 for b in raw))
        elif how == "truncate":
            replace_file(path, raw[: len(raw) // 2])
        elif how == "other file":
            replace_file(path, (base.ds / "r0" / "t" / FILE).read_bytes())
        elif how == "delete":
            path.unlink()
        elif how == "many rows":
            table = pa.table({"sequence": pa.array(range(1, 50_001), pa.int64())})
            replace_file(path, parquet_bytes(table))
        else:
            try:
                table = pq.read_table(path)
            except pa.ArrowException:
                return
            columns = table.to_pydict()
            if "record" not in columns:
                return
            doc = json.loads(columns["record"][0])
            written = first_table(doc)
            if written is not None:
                if how == "escape":
                    written["files"] = [f"../secret/{SECRET_REVISION}/t/{FILE}"]
                else:  # huge rows
                    written["rows"] = 10**18
            columns["record"][0] = canonical_json(doc)
            forged = pa.table(
                {n: pa.array(v, table.schema.field(n).type) for n, v in columns.items()}
            ).replace_schema_metadata(table.schema.metadata)
            replace_file(path, parquet_bytes(forged))
    elif kind == "hint":
        replace_file(root / LAST_CHECKPOINT, mutation[1])
    elif kind == "description":
        _, how = mutation
        path = root / DESCRIPTION
        raw = path.read_bytes() if path.is_file() else b""
        if how == "garbage":
            replace_file(path, bytes((b * 7 + 13) % 256 for b in raw))
        elif how == "truncate":
            replace_file(path, raw[: len(raw) // 2])
        elif how == "other file":
            replace_file(path, (base.ds / "r0" / "t" / FILE).read_bytes())
        elif how == "delete":
            path.unlink(missing_ok=True)
        else:
            try:
                table = pq.read_table(path)
            except (pa.ArrowException, OSError):
                return
            if how == "many rows":
                table = pa.concat_tables([table] * 20_000)
            else:  # past the head: entries listed that the log lacks (a lost head)
                more = table.slice(0, 1).to_pydict()
                if "sequence" not in more:
                    return
                more["sequence"] = [HEAD + 5]
                table = pa.concat_tables([table, pa.table(more, schema=table.schema)])
            replace_file(path, parquet_bytes(table))
    elif kind == "data file":
        _, n, how = mutation
        revision, table = DATA[n]
        path = root / revision / table / FILE
        raw = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        replacement = {
            "truncate": lambda: raw[: len(raw) // 2],
            "garbage": lambda: bytes((b * 7 + 13) % 256 for b in raw),
            "empty": lambda: b"",
            # another file of the copy (5 rows, the same schema)
            "other file": lambda: (
                (root / DATA[(n + 1) % len(DATA)][0] / "t" / FILE).read_bytes()
                if (root / DATA[(n + 1) % len(DATA)][0] / "t" / FILE).is_file()
                else b""
            ),
            "more rows": lambda: parquet_bytes(
                pa.table({"id": pa.array([1] * 200_000, pa.int64())})
            ),
            # the rows the log records, in another schema
            "other schema": lambda: parquet_bytes(
                pa.table({"id": pa.array(["a"] * 5), "v": pa.array([1.5] * 5)})
            ),
            "no id": lambda: parquet_bytes(pa.table({"v": pa.array(range(5), pa.int64())})),
        }[how]()
        replace_file(path, replacement)
    else:  # pragma: no cover (a kind MUTATIONS draws and this does not apply)
        raise AssertionError(kind)


# -- what runs on a mutated copy, and what it must hold --------------------------------------


def shown(value: object) -> str:
    """What an outcome shows a user (for the markers no output may hold)."""
    if hasattr(value, "to_dicts"):
        return repr(value.to_dicts())
    if hasattr(value, "to_pylist"):
        return repr(value.to_pylist())
    return repr(value)


def planted(root: Path) -> set[str]:
    """The markers the copy's own files hold (a forged path naming the sacrificial
    revision): an error may quote them."""
    paths = list(root.rglob("*"))
    texts = [os.readlink(p).encode() for p in paths if p.is_symlink()]
    texts += [p.read_bytes() for p in paths if p.is_file() and not p.is_symlink()]
    return {m for m in MARKERS if any(m.encode() in t for t in texts)}


def hold_no_secret(what: str, text: str, quoted: set[str] = frozenset()) -> None:
    leaked = [m for m in MARKERS if m in text and m not in quoted]
    assert not leaked, f"{what} shows {leaked} of the sacrificial folder: {text[:2000]}"


def reader_outcomes(root: Path, cache: Path) -> Iterator[tuple[str, object]]:
    """(what, result or error) of each read through ``DatasetReader`` (no Spark)."""

    def attempt(what, call):
        try:
            return what, call()
        except RevisionsError as exc:
            return what, exc

    opened = attempt("open", lambda: DatasetReader(root))
    yield opened
    reader = opened[1]
    if isinstance(reader, RevisionsError):
        return
    yield attempt("revisions", reader.revisions)
    tables = attempt("tables", reader.tables)
    yield tables
    names = list(tables[1]) if isinstance(tables[1], dict) else []
    for table in [*names[:3], "t"]:
        yield attempt(f"read {table!r}", lambda t=table: reader.read(t, with_revision=True))
        yield attempt(f"read {table!r} at 1", lambda t=table: reader.read(t, at=1))
        yield attempt(
            f"scan {table!r}",
            lambda t=table: reader.scan(t).to_polars().collect(),
        )
        yield attempt(f"changes {table!r}", lambda t=table: reader.changes(t, since_sequence=1).df)
        yield attempt(f"history {table!r}", lambda t=table: reader.history(t))
    cached = attempt("open with a cache", lambda: DatasetReader(root, cache_dir=cache))
    yield cached
    if not isinstance(cached[1], RevisionsError):
        yield attempt("cached read", lambda: cached[1].read("t"))


#: the commands run in-process on each copy (``{root}``), none needing Spark; vacuum last
COMMANDS = [
    ["log", "{root}", "--json"],
    ["log", "{root}", "--table", "t"],
    ["tables", "{root}", "--json"],
    ["describe", "{root}"],
    ["show", "{root}", "t", "--json", "--with-revision"],
    ["show", "{root}", "u", "--at", "1"],
    ["diff", "{root}", "t", "--since", "1", "--json"],
    ["history", "{root}", "t", "--id", "id=3", "--json"],
    ["verify", "{root}", "--json"],
    ["lag", "{root}", "--json"],
    ["vacuum", "{root}", "--dry-run", "--json"],
    ["vacuum", "{root}", "--retain", "0", "--force", "--grace", "0", "--json"],
]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    error: str | None  #: the class of the RevisionsError the command ended with


def run_cli(args: list[str]) -> Ran:
    """A command in-process (CliRunner), and the class of the error it ended with."""
    seen: list[str] = []
    original = common.exit_code_of

    def spy(exc):
        seen.append(type(exc).__name__)
        return original(exc)

    common.exit_code_of = spy
    try:
        done = CliRunner().invoke(cli, args)
    finally:
        common.exit_code_of = original
    return Ran(done.exit_code, done.stdout, done.stderr, seen[-1] if seen else None)


def check_command(args: list[str], ran: Ran, quoted: set[str]) -> None:
    what = " ".join(a[:80] for a in args)
    hold_no_secret(what, ran.stdout + ran.stderr, quoted)
    assert "Traceback" not in ran.stdout + ran.stderr, f"{what}: {ran.stderr[-3000:]}"
    assert ran.code in (0, 1, 2, 3), f"{what}: exit {ran.code}: {ran.stderr[-3000:]}"
    if ran.code in (2, 3):
        assert ran.stderr.startswith("revisions: error: ") and ran.stderr.count("\n") == 1, (
            f"{what}: {ran.stderr[-3000:]}"
        )
        # a usage error of click's own has no RevisionsError; any other is one, never an
        # exception the command line calls unexpected
        assert "unexpected" not in ran.stderr.split(":", 3)[2], f"{what}: {ran.stderr}"
    event(f"{args[0]}: exit {ran.code}" + (f" ({ran.error})" if ran.error else ""))


def check_copy(base: Base, work: Path, mutations: list[tuple]) -> None:
    """Apply ``mutations`` to a copy of the dataset in ``work`` and run every entry point."""
    root = work / "ds"
    shutil.copytree(base.ds, root, symlinks=True)
    shutil.copytree(base.folder / "secret", work / "secret", symlinks=True)
    for mutation in mutations:
        mutate(base, root, mutation)
        event(f"mutation: {mutation[0]}")
    secret_before = digest(work / "secret")
    quoted = planted(root)
    cache = work / "cache"

    for what, outcome in reader_outcomes(root, cache):
        assert isinstance(outcome, RevisionsError) or not isinstance(outcome, BaseException)
        hold_no_secret(what, shown(outcome), quoted)
        if hasattr(outcome, "to_dicts") and "id" in outcome.columns:
            ids = set(outcome.get_column("id").to_list())
            assert ids <= OWN_IDS | {None} or not all(isinstance(i, int) for i in ids), (
                f"{what}: ids from outside the copy: {sorted(ids - OWN_IDS)}"
            )
        event(f"reader {what.split()[0]}: {type(outcome).__name__}")
    try:
        findings = verify(str(root))
    except RevisionsError as exc:
        findings = exc
    hold_no_secret("verify()", shown(findings), quoted)

    for command in COMMANDS:
        args = [a.format(root=root) for a in command]
        check_command(args, run_cli(args), quoted)

    assert digest(work / "secret") == secret_before, "the sacrificial folder changed"
    assert {p.name for p in work.iterdir()} <= {"cache", "ds", "secret"}, list(work.iterdir())


@settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=3))
# what exploring found: JSON nested past Python's recursion limit raised RecursionError
@example(mutations=[("raw entry", 1, "deep")])
@example(mutations=[("hint", b"[" * 1020)])
# a data file, its table folder, its revision folder linked to the sacrificial dataset
@example(mutations=[("link", "data file", 3), ("link", "revision folder", 0)])
@example(mutations=[("link", "table folder", 2), ("path", 4, HOSTILE_PATHS[0], True)])
def test_a_hostile_dataset_is_read_or_refused(base, mutations):
    with tempfile.TemporaryDirectory() as tmp:
        check_copy(base, Path(tmp), mutations)


def test_the_console_script_refuses_a_data_file_linked_out_of_the_root(base, tmp_path):
    """One case as a user types it: a data file replaced by a symlink to the sacrificial
    file (same schema, same row count): ``revisions show`` ends with exit 3 and one line
    naming the link, and shows no row of the sacrificial file."""
    shutil.copytree(base.ds, tmp_path / "ds", symlinks=True)
    shutil.copytree(base.folder / "secret", tmp_path / "secret", symlinks=True)
    mutate(base, tmp_path / "ds", ("link", "data file", 0))
    done = subprocess.run(
        [sys.executable, "-m", "revisions_assets", "show", str(tmp_path / "ds"), "t"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, SECRET_VAR: SECRET},
    )
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert "symbolic link" in done.stderr and f"r0/t/{FILE}" in done.stderr, done.stderr
    hold_no_secret("show", done.stdout + done.stderr, planted(tmp_path / "ds"))


#: where a few bytes belong: the entry after the head (an open reads it, to find the head),
#: the checkpoint hint, the checkpoint
OVERSIZED = [entry_path(HEAD + 1), LAST_CHECKPOINT, checkpoint_path(CHECKPOINT)]


@pytest.mark.parametrize("target", OVERSIZED, ids=["entry", "hint", "checkpoint"])
def test_an_oversized_file_where_a_few_bytes_belong_is_never_read_whole(base, tmp_path, target):
    """What exploring found beside the mutations (before, an open read each of these files
    whole: 1.6-2 GiB for a sparse file of 1.5 GiB, which costs no disk): a sparse file of
    3 GiB in its place. ``revisions verify`` in a fresh process reports it (exit 1, or 0 for
    a hint that names no checkpoint: opens read the entries) and peaks far below 1 GiB."""
    shutil.copytree(base.ds, tmp_path / "ds", symlinks=True)
    with open(tmp_path / "ds" / target, "wb") as sparse:
        sparse.truncate(3 * 2**30)
    measured = run_measuring_peak(
        "revisions_assets", ["verify", str(tmp_path / "ds")], tmp_path, timeout=120
    )
    done = measured.done
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-2000:])
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert measured.peak_mib is not None and measured.peak_mib < 1024, measured.peak_mib


@pytest.mark.parametrize("how", ["other schema", "no id"])
def test_a_data_file_of_the_right_rows_and_another_schema_is_refused(base, tmp_path, how):
    """What exploring found: a data file replaced by a Parquet file of the same 5 rows whose
    ``id`` is a string, or that has no
    ``id``. A scan must refuse it with a CorruptFileError naming the file, not a Polars
    error (``read`` refuses the file without an id, through the check of its columns)."""
    shutil.copytree(base.ds, tmp_path / "ds", symlinks=True)
    ids = pa.array(range(15, 20), pa.int64())
    other = {
        "other schema": pa.table({"id": pa.array(["a"] * 5), "v": pa.array([1.5] * 5)}),
        "no id": pa.table({"v": ids, "_deleted": pa.array([False] * 5)}),
    }[how]
    replace_file(tmp_path / "ds" / "r1" / "t" / FILE, parquet_bytes(other))
    with pytest.raises(RevisionsError, match=f"r1/t/{FILE}"):
        DatasetReader(tmp_path / "ds").scan("t").to_polars().collect()
