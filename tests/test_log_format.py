"""The log's format 3 without Spark: file statistics in the entries, the chain of digests,
checkpoint records checked as entries, and lying metadata that must not exhaust memory
(each hostile file is read in a fresh process whose peak memory, VmHWM, is measured)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from harness.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from revisions_assets.core.errors import CorruptLogError
from revisions_assets.core.log import health
from revisions_assets.core.log.file_stats import check_stored_file, read_file_stats
from revisions_assets.core.log.health import entry_problem, parse_entry
from revisions_assets.core.log.layout import DESCRIPTION, LAST_CHECKPOINT
from revisions_assets.core.log.records import (
    MAX_ID_TEXT,
    FileStats,
    Revision,
    TableWrite,
    canonical_json,
    decode_id_value,
    encode_id_value,
)
from revisions_assets.core.log.revision_log import (
    RevisionLog,
    checkpoint_path,
    description_table,
    entry_path,
)
from revisions_assets.core.maintain.vacuum import Vacuum
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.storage.base import LocalStorage

T0 = datetime(2020, 1, 1, tzinfo=UTC)
SCHEMA = canonical_json(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
)


def stats(path: str, lo: int = 0, hi: int = 9) -> FileStats:
    return FileStats(path, 10, 1000, 1, 900, 92, "ab" * 32, (lo,), (hi,))


def record(seq: int, files: tuple[str, ...] | None = None, with_stats: bool = True) -> Revision:
    files = files or (f"r{seq}/t/part-0.parquet",)
    write = TableWrite(
        ("id",),
        SCHEMA,
        "v1",
        10 * len(files),
        0,
        files,
        1000 * len(files),
        file_stats=tuple(stats(f) for f in files) if with_stats else None,
    )
    return Revision(
        name=f"r{seq}",
        timestamp=T0 + timedelta(days=seq),
        is_major=seq == 1,
        sequence=seq,
        committed_at=T0,
        tables={"t": write},
        version="v1",
    )


def committed(root: Path, count: int, checkpoint: int | None = None) -> RevisionLog:
    log = RevisionLog(LocalStorage(root))
    log.refresh()
    for seq in range(1, count + 1):
        assert log.try_append(record(seq))
        if seq == checkpoint:
            log.write_checkpoint(seq)
    log.publish_description()
    return log


def kinds(root: Path) -> set[tuple[str, str]]:
    return {(f.kind, f.path) for f in verify(str(root))}


# -- file statistics in the entries ---------------------------------------------------------

ID_VALUES = {
    "long": st.integers(-(2**63), 2**63 - 1),
    "short": st.integers(-(2**15), 2**15 - 1),
    "string": st.text(max_size=20) | st.just("é" * MAX_ID_TEXT),
    "boolean": st.booleans(),
    "date": st.dates(),
    "timestamp": st.datetimes(timezones=st.just(UTC)),
    "timestamp_ntz": st.datetimes(),
    "decimal(12,3)": st.decimals(
        min_value=-(10**9), max_value=10**9, places=3, allow_nan=False, allow_infinity=False
    ),
}


@pytest.mark.parametrize("type_name", sorted(ID_VALUES))
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_id_bounds_read_back_as_the_same_values(type_name, data):
    """A bound recorded for an id of each type reads back as the same Python value, and
    its JSON is stable (recorded again, it is the same text)."""
    value = data.draw(ID_VALUES[type_name])
    encoded = encode_id_value(type_name, value)
    assert encoded is not None
    text = json.dumps(encoded)
    decoded = decode_id_value(type_name, json.loads(text))
    assert decoded == value and type(decoded) is type(value)
    assert json.dumps(encode_id_value(type_name, decoded)) == text


@pytest.mark.parametrize(
    "type_name, value",
    [
        ("long", True),  # a bool is no integer id
        ("long", "1"),
        ("string", "x" * (MAX_ID_TEXT + 1)),
        ("date", "2020-1-1"),
        ("date", 18262),
        ("timestamp", 1.5),
        ("timestamp", 10**30),  # out of the range of times
        ("decimal(12,3)", "1e3"),  # not the canonical text
        ("decimal(12,3)", "NaN"),
        ("binary", "aGk="),  # ids of other types record no bounds
    ],
)
def test_a_bound_of_the_wrong_type_is_refused(type_name, value):
    with pytest.raises(ValueError):
        decode_id_value(type_name, value)


def test_file_stats_round_trip_through_the_entry_json():
    r = record(1, files=("r1/t/a.parquet", "r1/t/b.parquet"))
    doc = json.loads(r.to_json())
    assert (
        doc["tables"]["t"]["file_stats"]
        == [
            {
                "bytes": 1000,
                "footer_length": 92,
                "footer_offset": 900,
                "footer_sha256": "ab" * 32,
                "id_max": [9],
                "id_min": [0],
                "row_groups": 1,
                "rows": 10,
            }
        ]
        * 2
    )
    assert entry_problem(doc) is None
    back = Revision.from_json(r.to_json())
    assert back == r and back.tables["t"].file_stats[1].path == "r1/t/b.parquet"
    old = Revision.from_json(record(2, with_stats=False).to_json())
    assert old.tables["t"].file_stats is None  # entries written before: None, not ()


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda s: s.pop(), "one object per file"),
        (lambda s: s[0].update(rows=-1), "file_stats[0].rows"),
        (lambda s: s[0].update(footer_sha256="xyz"), "footer_sha256"),
        (lambda s: s[0].update(id_min=[1, 2]), "one value per id column"),
        (lambda s: s[0].update(id_max=["9"]), "not a bound of an id of type 'long'"),
        (lambda s: s.__setitem__(0, [1]), "not an object"),
    ],
)
def test_an_entry_with_bad_file_stats_is_refused(tmp_path, edit, problem):
    doc = json.loads(record(1).to_json())
    edit(doc["tables"]["t"]["file_stats"])
    assert problem in (entry_problem(doc) or "")
    with pytest.raises(CorruptLogError, match="tables.t.file_stats"):
        parse_entry(json.dumps(doc).encode(), 1, str(tmp_path))


def test_stats_come_from_footers_and_a_rewritten_file_is_found(tmp_path):
    """The stats of a file are what its footer says (without reading the data); a file
    rewritten with other values of the same size is told apart by its footer's digest;
    entries written before get theirs from the footers, once per handle."""
    storage = LocalStorage(tmp_path)
    path = "r1/t/part-0.parquet"
    (tmp_path / "r1" / "t").mkdir(parents=True)
    ids = pa.array([5, 3, 9, 7], pa.int64())
    pq.write_table(pa.table({"id": ids, "v": ids}), tmp_path / path, row_group_size=2)
    (found,) = read_file_stats(storage, [path], ("id",), SCHEMA)
    meta = pq.read_metadata(tmp_path / path)
    size = (tmp_path / path).stat().st_size
    assert (found.rows, found.row_groups, found.bytes) == (4, 2, size)
    assert (found.id_min, found.id_max) == ((3,), (9,))
    assert found.footer_offset + found.footer_length + 8 == size
    assert found.footer_length == meta.serialized_size
    assert check_stored_file(storage, found).problem is None

    log = RevisionLog(storage)
    log.refresh()
    write = replace(record(1).tables["t"], files=(path,), file_stats=None)
    reads = []
    original = storage.read_tail_sized
    storage.read_tail_sized = lambda rel, n: reads.append(rel) or original(rel, n)
    assert log.file_stats(write) == (found,)
    assert log.file_stats(write) == (found,) and reads == [path]  # once per handle
    storage.read_tail_sized = original

    other = pa.array([5, 3, 9, 8], pa.int64())  # one value differs: same size, other stats
    pq.write_table(pa.table({"id": other, "v": ids}), tmp_path / path, row_group_size=2)
    assert (tmp_path / path).stat().st_size == size
    problem = check_stored_file(storage, found).problem
    assert "rewritten after its commit" in problem and "footer differs" in problem
    (tmp_path / path).write_bytes(b"not parquet at all, replaced")
    assert check_stored_file(storage, found).problem == "its last bytes are not PAR1"
    (tmp_path / path).unlink()
    assert check_stored_file(storage, found).problem == "missing"


def test_an_entry_larger_than_any_entry_is_not_decoded(tmp_path, monkeypatch):
    raw = record(1).to_json().encode()
    monkeypatch.setattr(health, "MAX_ENTRY_BYTES", len(raw) - 1)
    with pytest.raises(
        CorruptLogError, match=rf"is larger than any entry \(more than {len(raw) - 1} bytes\)"
    ):
        parse_entry(raw, 1, str(tmp_path))


def test_verify_finds_a_file_rewritten_after_its_commit(tmp_path):
    """``verify`` compares every live file with the stats its entry recorded: a file
    rewritten with the same rows but other values is one finding, naming what differs."""
    storage = LocalStorage(tmp_path)
    path = "r1/t/part-0.parquet"
    (tmp_path / "r1" / "t").mkdir(parents=True)
    ids = pa.array(range(10), pa.int64())
    pq.write_table(pa.table({"id": ids, "v": ids}), tmp_path / path)
    log = RevisionLog(storage)
    log.refresh()
    written = read_file_stats(storage, [path], ("id",), SCHEMA)
    write = replace(record(1).tables["t"], files=(path,), file_stats=written)
    assert log.try_append(replace(record(1), tables={"t": write}))
    assert not [f for f in verify(str(tmp_path)) if f.severity == "error"]
    pq.write_table(pa.table({"id": ids, "v": pc.negate(ids)}), tmp_path / path)
    (finding,) = [f for f in verify(str(tmp_path)) if f.severity == "error"]
    assert (finding.kind, finding.path) == ("corrupt_file", path)
    assert "revision 'r1' (sequence 1), table 't', was rewritten" in finding.message
    assert "its footer differs from the one recorded at commit" in finding.message


# -- the chain of digests --------------------------------------------------------------------


def test_each_entry_records_the_digest_of_the_one_before(tmp_path):
    log = committed(tmp_path, 3)
    stored = [(tmp_path / entry_path(s)).read_bytes() for s in (1, 2, 3)]
    docs = [json.loads(raw) for raw in stored]
    assert "previous_sha256" not in docs[0]
    assert docs[1]["previous_sha256"] == hashlib.sha256(stored[0]).hexdigest()
    assert docs[2]["previous_sha256"] == hashlib.sha256(stored[1]).hexdigest()
    assert [r.previous for r in log.records] == [None, *(d["previous_sha256"] for d in docs[1:])]
    assert docs[0]["format"] == 3


def rewrite(root: Path, sequence: int, **fields) -> None:
    """Rewrite entry ``sequence`` in place, as a hand or a hostile tool would."""
    path = root / entry_path(sequence)
    path.write_text(canonical_json({**json.loads(path.read_text()), **fields}))


def test_a_rewritten_middle_entry_breaks_the_chain(tmp_path):
    """Reads go on; commits and vacuums are refused; verify names the entry after it."""
    committed(tmp_path, 4)
    rewrite(
        tmp_path, 2, tables={"t": record(2, files=("elsewhere/t/x.parquet",)).tables["t"].to_doc()}
    )
    log = RevisionLog(LocalStorage(tmp_path))
    assert [r.name for r in log.refresh()] == ["r1", "r2", "r3", "r4"]
    with pytest.raises(CorruptLogError, match=r"chain.*00000000000000000003\.json.*restore"):
        log.try_append(record(5))
    assert not (tmp_path / entry_path(5)).exists()
    with pytest.raises(CorruptLogError, match="chain"):
        Vacuum(LocalStorage(tmp_path), RevisionLog(LocalStorage(tmp_path))).run(
            retain=timedelta(0),
            keep_majors=False,
            dry_run=True,
            consumer_positions={},
            grace=timedelta(0),
            now=T0,
        )
    assert ("log_chain_broken", entry_path(3)) in kinds(tmp_path)


def test_the_first_entry_after_a_checkpoint_is_checked_against_it(tmp_path):
    committed(tmp_path, 6, checkpoint=4)
    rewrite(tmp_path, 5, previous_sha256="0" * 64)
    log = RevisionLog(LocalStorage(tmp_path))
    log.refresh()
    with pytest.raises(CorruptLogError, match=r"00000000000000000005\.json records a digest"):
        log.try_append(record(7))
    found = kinds(tmp_path)  # entry 6 recorded the digest of entry 5 as committed
    assert {("log_chain_broken", entry_path(5)), ("log_chain_broken", entry_path(6))} <= found


def test_an_entry_rewritten_under_its_checkpoint_is_reported(tmp_path):
    """Opens read the checkpoint's copy (reads are not affected); verify compares each
    entry file with it."""
    committed(tmp_path, 6, checkpoint=4)
    rewrite(tmp_path, 2, name="forged")
    log = RevisionLog(LocalStorage(tmp_path))
    assert log.refresh()[1].name == "r2"
    found = kinds(tmp_path)
    assert {("log_entry_rewritten", entry_path(2)), ("log_chain_broken", entry_path(3))} <= found


def test_entries_of_earlier_formats_start_no_chain(tmp_path):
    """Entries without a digest (format 2) are read as before; the chain starts at the first
    entry that records one."""
    storage = LocalStorage(tmp_path)
    for seq in (1, 2):
        doc = json.loads(record(seq, with_stats=False).to_json())
        doc["format"] = 2
        storage.create_exclusive(entry_path(seq), canonical_json(doc).encode())
    log = RevisionLog(storage)
    log.refresh()
    assert log.try_append(record(3)) and log.try_append(record(4))
    assert RevisionLog(storage).refresh()[2].previous is not None
    log_kinds = {"log_chain_broken", "log_entry_corrupt", "log_entry_rewritten"}
    assert not {kind for kind, _ in kinds(tmp_path)} & log_kinds  # (no data files here)


# -- checkpoint records get the checks of entries --------------------------------------------


def forge_checkpoint(root: Path, sequence: int, edit) -> None:
    path = root / checkpoint_path(sequence)
    table = pq.read_table(path)
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    edit(columns)
    forged = pa.table(
        {name: pa.array(values, table.schema.field(name).type) for name, values in columns.items()}
    ).replace_schema_metadata(table.schema.metadata)
    pq.write_table(forged, path)


def escape_path(columns) -> None:
    doc = json.loads(columns["record"][1])
    doc["tables"]["t"]["files"] = ["../../outside/x.parquet"]
    columns["record"][1] = canonical_json(doc)


def vacuum_without_mark(columns) -> None:
    """A maintenance entry whose details the entry checks do not cover."""
    doc = json.loads(columns["record"][2])
    doc.update(kind="vacuum", vacuum={"horizon_sequence": 1})
    columns["record"][2], columns["kind"][2] = canonical_json(doc), "vacuum"


def table_name_column(columns) -> None:
    columns["tables"][2] = ["../evil"]


@pytest.mark.parametrize(
    "edit, problem",
    [
        (escape_path, "outside the dataset root"),
        (table_name_column, "column 'tables'"),
        (lambda c: c["name"].__setitem__(0, "other"), "column 'name'"),
        (lambda c: c["record"].__setitem__(0, "{broken"), "not valid JSON"),
        (vacuum_without_mark, "cannot be read: KeyError"),
    ],
)
def test_a_hostile_checkpoint_is_not_loaded(tmp_path, edit, problem):
    """A checkpoint whose records fail the checks of entries, or disagree with its columns:
    opens read the entry files (the right log), verify reports it as an error; without the
    entry files an open refuses."""
    committed(tmp_path, 4, checkpoint=3)
    forge_checkpoint(tmp_path, 3, edit)
    assert [r.name for r in RevisionLog(LocalStorage(tmp_path)).refresh()] == [
        "r1",
        "r2",
        "r3",
        "r4",
    ]
    findings = {f.kind: f for f in verify(str(tmp_path))}
    assert findings["checkpoint_invalid"].severity == "error"
    assert problem in findings["checkpoint_invalid"].message
    for seq in (1, 2, 3):
        (tmp_path / entry_path(seq)).unlink()
    with pytest.raises(CorruptLogError, match=rf"checkpoint.*{problem}.*stop at sequence 0"):
        RevisionLog(LocalStorage(tmp_path)).refresh()


# -- lying metadata: bounded memory in a fresh process ---------------------------------------

#: a fresh process: open the log and try a commit, then verify; prints the outcome of each
#: and the peak memory (VmHWM) in MiB
OPEN_AND_VERIFY = """
import json, sys, time
from datetime import UTC, datetime
from revisions_assets.core.log.records import Revision, TableWrite
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.storage.base import LocalStorage

def outcome(call):
    try:
        return call()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:600]

start = time.monotonic()
log = RevisionLog(LocalStorage(sys.argv[1]))
opened = outcome(lambda: [r.name for r in log.refresh()])
committed = outcome(lambda: log.try_append(
    Revision("next", datetime(2021, 1, 1, tzinfo=UTC), False, log.head + 1,
             datetime(2021, 1, 1, tzinfo=UTC), {})))
found = outcome(lambda: sorted([f.kind, f.path] for f in verify(sys.argv[1])))
with open("/proc/self/status") as fh:
    peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024
print(json.dumps({"open": opened, "commit": committed, "verify": found, "peak_mib": peak,
                  "seconds": time.monotonic() - start}))
"""


def in_fresh_process(root: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(OPEN_AND_VERIFY), str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


#: what a checkpoint may decode to is far below this; the bound a hostile file must keep
PEAK_MIB = 1024


def expanding_checkpoint(path: Path, rows: int, value_bytes: int, dictionary: bool) -> None:
    """A checkpoint of ``rows`` records of ``value_bytes`` each, a few KB on storage: zstd
    pages of one repeated byte, or one dictionary value every row points to."""
    value = pa.array(["x" * value_bytes])
    sequences = pa.array(range(1, rows + 1), pa.int64())
    names = ["sequence", "record"]
    if dictionary:
        record = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), value)
        table = pa.table([sequences, record], names=names)
        pq.write_table(table, path, compression="zstd", write_statistics=False)
        return
    schema = pa.schema([("sequence", pa.int64()), ("record", pa.string())])
    with pq.ParquetWriter(
        path, schema, compression="zstd", write_statistics=False, use_dictionary=False
    ) as out:
        for seq in range(rows):
            out.write_table(pa.table([sequences.slice(seq, 1), value], schema=schema))


@pytest.mark.slow
@pytest.mark.parametrize(
    "rows, dictionary",
    # 1.1 GB of zstd pages (5 GB costs 10 s to write: the bound is the same), 5.2 GB through
    # a dictionary
    [(21, False), (100, True)],
    ids=["1.1GB-of-zstd-pages", "5.2GB-through-a-dictionary"],
)
def test_a_checkpoint_that_expands_to_gigabytes_is_never_decoded(tmp_path, rows, dictionary):
    """A checkpoint of records of 52 MB (gigabytes decoded, a few KB on storage): a fresh
    process opens the log from its entry files, verify warns, peak memory stays small; with
    the entry files gone, the open refuses with an error that names the checkpoint."""
    committed(tmp_path, rows + 1, checkpoint=rows)
    path = tmp_path / checkpoint_path(rows)
    expanding_checkpoint(path, rows, 52 * 2**20, dictionary)
    assert path.stat().st_size < 2**20
    got = in_fresh_process(tmp_path)
    assert got["open"] == [f"r{s}" for s in range(1, rows + 2)] and got["commit"] is True, got
    assert ["checkpoint_unreadable", LAST_CHECKPOINT] in got["verify"], got
    assert got["peak_mib"] < PEAK_MIB, got
    if not dictionary:
        return  # how a checkpoint expands changes nothing below: once is enough
    for seq in range(1, rows + 3):
        (tmp_path / entry_path(seq)).unlink()
    (tmp_path / DESCRIPTION).unlink()
    got = in_fresh_process(tmp_path)
    assert got["open"].startswith("CorruptLogError") and "more than" in got["open"], got
    assert got["peak_mib"] < PEAK_MIB, got


@pytest.mark.slow
def test_a_description_of_millions_of_rows_is_reported_not_decoded(tmp_path):
    """description.parquet of 5M rows (about 11 MB) beside a log of 3 entries: no lost head
    (too many rows past the head to be one), verify reports it stale without decoding it,
    a commit rewrites it; in seconds and small memory."""
    committed(tmp_path, 3)
    rows = 5_000_000
    empty = description_table([])
    path = tmp_path / DESCRIPTION
    with pq.ParquetWriter(path, empty.schema, compression="zstd") as out:
        chunk = 1_000_000
        for start in range(0, rows, chunk):
            sequences = pa.array(range(start + 1, start + chunk + 1), pa.int64())
            columns = {f.name: pa.nulls(chunk, f.type) for f in empty.schema}
            columns.update(name=pc.cast(sequences, pa.string()), sequence=sequences)
            out.write_table(pa.table(columns).select(empty.column_names))
    assert 4 * 2**20 < path.stat().st_size < 40 * 2**20
    got = in_fresh_process(tmp_path)
    assert got["open"] == ["r1", "r2", "r3"] and got["commit"] is True, got
    assert ["description_stale", DESCRIPTION] in got["verify"], got
    assert got["peak_mib"] < PEAK_MIB and got["seconds"] < 60, got
