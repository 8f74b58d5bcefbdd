"""Scenario 16: reads on object storage, counted in bytes and GET requests.

What a read moves across the storage boundary, not how long it takes: the machine is shared,
and bytes and requests do not move with its load. The dataset of scenario 12 (a major of
N x 11 columns and k minors of p·N, ``Config.reader_minors``) is written by the engine on the
local disk and copied to the tests' S3 server (``bench/s3_server.py``), whose log counts every
request and the bytes of every response. The reads run in a fresh process (a new
interpreter), one after the other, each on a new ``DatasetReader`` without ``cache_dir``
(Polars keeps nothing of a file between two queries: the counts are those of one fresh
process per read), and their rows are checked equal to the same reads of the local copy:

* the id + 1 of the 10 other columns / a full read;
* a lookup of 10 ids spread over the range / a full read, and its GET requests per revision
  the read merges;
* the floor beside them: ``pl.scan_parquet`` of the same files with the same projection or
  filter (no merge: what pyiceberg, delta-rs or Polars alone fetch);
* before: the reader that fetched every file of a read whole (a read with ``cache_dir``: what
  a reader without one did before ranged reads).

The download cache (``cache_dir``) keeps whole files. Beside it, what a cache keeping the
byte ranges it fetched would hold, computed from the server's log: its first read fetches
the ranges a ranged read fetches (each once), a second read the ranges it needs that the
first did not, and an offline read works only if every range it needs was fetched before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import boto3
import polars as pl

from revisions_assets import DatasetReader

from .data import ID, TABLE
from .harness import Context, Outcome, Row, ratio, report
from .reader import dataset
from .s3_server import Request, S3Server, Traffic

BUCKET = "revisions-bench"
#: fake credentials of the loopback server (the reads' processes get them from the environment)
ACCESS_KEY, SECRET_KEY = "AKIAREVISIONSBENCH", "revisions/bench+secret"
#: a request on this bucket marks where the next step of a process starts in the server's log
MARKER = "bench-step-marker"
COLUMN = "f_amount"

#: a fresh process running ``steps`` in order: each marks the server's log, runs one read and
#: writes its rows to ``<out>/<label>.parquet``
PROCESS = """
import json, os, sys, urllib.error, urllib.request
import polars as pl
from revisions_assets import DatasetReader
args = json.loads(sys.argv[1])
root, endpoint, out, cache = args["root"], args["endpoint"], args["out"], args["cache"]
TABLE, ID, COLUMN, TEN, URIS = args["table"], args["id"], args["column"], args["ten"], args["uris"]
options = {{"endpoint_url": endpoint}}  # credentials and region from the environment
raw = {{"aws_endpoint_url": endpoint, "aws_allow_http": "true"}}  # Polars alone

def mark(label):
    try:
        urllib.request.urlopen(f"{{endpoint}}/{marker}/{{label}}")
    except urllib.error.HTTPError:
        pass

{steps}
"""
#: the reads of the process, in order: each leaves its rows in ``rows`` (a Polars DataFrame)
STEPS = {
    "full": "rows = DatasetReader(root, storage_options=options).read(TABLE)",
    "column": "rows = DatasetReader(root, storage_options=options).read(TABLE, columns=[COLUMN])",
    "lookup": "rows = DatasetReader(root, storage_options=options).read(TABLE, "
    "filter=pl.col(ID).is_in(TEN))",
    "floor_column": "rows = pl.scan_parquet(URIS, storage_options=raw, glob=False)"
    ".select(ID, COLUMN).collect()",
    "floor_lookup": "rows = pl.scan_parquet(URIS, storage_options=raw, glob=False)"
    ".filter(pl.col(ID).is_in(TEN)).collect()",
    "cache_first": "rows = DatasetReader(root, storage_options=options, cache_dir=cache)"
    ".read(TABLE, columns=[COLUMN])",
    "cache_second": "rows = DatasetReader(root, storage_options=options, cache_dir=cache)"
    ".read(TABLE, filter=pl.col(ID).is_in(TEN))",
    "cache_offline": "rows = DatasetReader(root, cache_dir=cache, offline=True).read(TABLE)",
}

Interval = tuple[int, int]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Disjoint, sorted intervals covering ``intervals`` (``end`` exclusive)."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def uncovered(wanted: list[Interval], held: list[Interval]) -> int:
    """The bytes of ``wanted`` outside ``held`` (both disjoint and sorted)."""
    total = 0
    for start, end in wanted:
        for h_start, h_end in held:
            if h_end <= start or h_start >= end:
                continue
            if h_start > start:
                total += h_start - start
            start = max(start, h_end)
            if start >= end:
                break
        total += max(0, end - start)
    return total


def served_ranges(
    requests: Iterable[Request], sizes: dict[str, int]
) -> Iterator[tuple[str, int, int]]:
    """(key, start, end) of the bytes each successful GET returned, ``end`` exclusive, from
    its ``Range`` header and the object's size (``sizes``)."""
    for r in requests:
        if r.method != "GET" or r.status not in (200, 206) or r.key not in sizes:
            continue
        size = sizes[r.key]
        spec = (r.range or "").removeprefix("bytes=")
        if not spec:
            yield r.key, 0, size
        elif spec.startswith("-"):
            yield r.key, max(0, size - int(spec[1:])), size
        else:
            first, _, last = spec.partition("-")
            yield r.key, int(first), min(size, int(last) + 1) if last else size


class RangeCache:
    """The byte ranges a cache keeping what reads fetched would hold, per object."""

    def __init__(self, sizes: dict[str, int]):
        self.sizes = sizes
        self.held: dict[str, list[Interval]] = {}

    def missing(self, requests: Sequence[Request]) -> int:
        """The bytes a read that fetched ``requests`` needs beyond what the cache holds."""
        return sum(
            uncovered(union(spans), self.held.get(key, []))
            for key, spans in self._spans(requests).items()
        )

    def keep(self, requests: Sequence[Request]) -> int:
        """Fetch what the read needs and the cache lacks; the bytes fetched."""
        fetched = self.missing(requests)
        for key, spans in self._spans(requests).items():
            self.held[key] = union([*self.held.get(key, []), *spans])
        return fetched

    def _spans(self, requests: Sequence[Request]) -> dict[str, list[Interval]]:
        spans: dict[str, list[Interval]] = {}
        for key, start, end in served_ranges(requests, self.sizes):
            spans.setdefault(key, []).append((start, end))
        return spans


def upload(root: Path, bucket: str, prefix: str, client: object) -> dict[str, int]:
    """Copy a dataset root to ``s3://bucket/prefix`` (its log and data files, paths kept);
    the sizes of its data files, by key."""
    sizes = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        key = f"{prefix}/{rel}"
        client.upload_file(str(path), bucket, key)  # type: ignore[attr-defined]
        if path.suffix == ".parquet" and not rel.startswith("_log/") and "/" in rel:
            sizes[key] = path.stat().st_size
    return sizes


def run_process(server: S3Server, args: dict, steps: Sequence[str]) -> dict[str, list[Request]]:
    """Run ``steps`` in one fresh process; the requests each step made, by step."""
    body = "\n".join(
        f"mark({step!r})\n{STEPS[step]}\nrows.write_parquet(f'{{out}}/{step}.parquet')"
        for step in steps
    )
    code = textwrap.dedent(PROCESS.format(marker=MARKER, steps=body))
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    start = server.mark()
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"benchmark subprocess failed: {done.stderr[-2000:]}")
    by_step: dict[str, list[Request]] = {}
    current = None
    for request in server.since(start):
        if request.bucket == MARKER:
            current = by_step.setdefault(request.key, [])
        elif current is not None:
            current.append(request)
    return by_step


def same_rows(label: str, got: pl.DataFrame, expected: pl.DataFrame) -> None:
    if not got.sort(ID).equals(expected.sort(ID)):
        raise RuntimeError(f"scenario 16: the {label} read over S3 differs from the local read")


def reads_on_object_storage(ctx: Context) -> Outcome:
    cfg = ctx.config
    k = cfg.reader_minors
    local_ds = dataset(ctx, "s16", cfg.n, k)
    local = DatasetReader(local_ds.root)
    server = S3Server()
    try:
        options = server.options(ACCESS_KEY, SECRET_KEY)
        client = boto3.client("s3", **options)
        client.create_bucket(Bucket=BUCKET)
        prefix = "s16/dataset"
        sizes = upload(Path(local_ds.root), BUCKET, prefix, client)
        root = f"s3://{BUCKET}/{prefix}"
        planned = local.scan(TABLE).plan_files()
        revisions = len(planned)
        files = [p for f in planned for p in f.paths]
        ten = list(range(0, cfg.n, max(1, cfg.n // 10)))[:10]
        out = ctx.folder("s16", "rows")
        args = {
            "root": root,
            "endpoint": server.endpoint_url,
            "out": str(out),
            "cache": str(ctx.folder("s16", "cache")),
            "table": TABLE,
            "id": ID,
            "column": COLUMN,
            "ten": ten,
            "uris": [f"{root}/{f}" for f in files],
        }
        steps = run_process(server, args, list(STEPS))
    finally:
        server.stop()

    def rows(step: str) -> pl.DataFrame:
        return pl.read_parquet(out / f"{step}.parquet")

    full_local = local.read(TABLE)
    lookup_local = local.read(TABLE, filter=pl.col(ID).is_in(ten))
    same_rows("full", rows("full"), full_local)
    same_rows("1-column", rows("column"), local.read(TABLE, columns=[COLUMN]))
    same_rows("10-id", rows("lookup"), lookup_local)
    same_rows("cached 1-column", rows("cache_first"), rows("column"))
    same_rows("cached 10-id", rows("cache_second"), lookup_local)
    same_rows("offline", rows("cache_offline"), full_local)

    def data(step: str) -> list[Request]:
        return [r for r in steps[step] if r.key in sizes]

    traffic = {step: Traffic.of(data(step), lambda r: True) for step in STEPS}
    stored = sum(sizes[f"{prefix}/{f}"] for f in files)
    full = traffic["full"]
    ranges = RangeCache(sizes)
    range_first = ranges.keep(data("column"))
    range_second = ranges.keep(data("lookup"))
    range_offline = ranges.missing(data("full"))

    def mib(n: int) -> str:
        return f"{n / 2**20:.2f} MiB" if n < 10 * 2**20 else f"{n / 2**20:.1f} MiB"

    def moved(t: Traffic) -> str:
        return f"{mib(t.bytes)} in {t.gets} GETs"

    def kinds(step: str) -> str:
        """The GETs of a step: footers (the file gate's), column chunks."""
        found = data(step)
        footers = sum(1 for r in found if (r.range or "").startswith("bytes=-"))
        return f"{footers} footers (the file gate's), {len(found) - footers} column-chunk ranges"

    common = f"N={cfg.n:,} x 11, after {k} minors of {cfg.p:.0%}; {len(files)} files"
    before = traffic["cache_first"]
    lookup = traffic["lookup"]
    rows_out = [
        Row(
            "16 S3: 1 column",
            common,
            [
                f"ranged {moved(traffic['column'])}",
                f"full read {moved(full)}",
                f"before (whole files) {moved(before)}",
                f"pl.scan_parquet floor {moved(traffic['floor_column'])}",
            ],
            ratio(traffic["column"].bytes, full.bytes),
            f"bytes: id + {COLUMN} / full read",
            "<= 0.30",
            0.30,
            note=f"no cache_dir; rows equal the local read; {kinds('column')}; "
            f"before: {ratio(before.bytes, full.bytes):.2f}x",
        ),
        Row(
            "16 S3: 10-id lookup",
            common,
            [
                f"ranged {moved(lookup)}",
                f"full read {moved(full)}",
                f"before (whole files) {moved(before)}",
                f"pl.scan_parquet floor {moved(traffic['floor_lookup'])}",
            ],
            ratio(lookup.bytes, full.bytes),
            "bytes: lookup / full read",
            "<= 0.02",
            0.02,
            note=f"rows equal the local read; before: {ratio(before.bytes, full.bytes):.2f}x",
        ),
        Row(
            "16 S3: 10-id lookup, requests",
            common + f", {revisions} revisions read",
            [
                f"ranged {lookup.gets} GETs",
                f"before (whole files) {before.gets} GETs",
                f"pl.scan_parquet floor {traffic['floor_lookup'].gets} GETs",
            ],
            ratio(lookup.gets, revisions),
            "GETs per revision read",
            "<= 4",
            4,
            note=f"{kinds('lookup')}; before: {ratio(before.gets, revisions):.1f} per revision",
        ),
        Row(
            "16 S3: full read",
            common,
            [f"ranged {moved(full)}", f"the files {mib(stored)}", f"before {moved(before)}"],
            ratio(full.bytes, stored),
            "bytes: full read / the files' size",
            "report",
            note="the columns a read needs (a full read leaves out _row_hash), each file's "
            "footer once (the file gate's)",
        ),
        Row(
            "16 S3 cache: whole files",
            common + ": 1 column, then 10 ids, then offline a full read",
            [
                f"first {moved(traffic['cache_first'])}",
                f"second {moved(traffic['cache_second'])}",
                f"offline full read {moved(traffic['cache_offline'])}",
            ],
            ratio(sum(traffic[s].bytes for s in ("cache_first", "cache_second")), stored),
            "bytes fetched by two reads / the files' size",
            "report",
            note="what cache_dir keeps: the files a read needs, whole; later reads and offline "
            "reads of those revisions fetch nothing",
        ),
        Row(
            "16 S3 cache: ranges (from the server's log)",
            common + ": 1 column, then 10 ids, then offline a full read",
            [
                f"first {mib(range_first)}",
                f"second {mib(range_second)}",
                f"offline full read lacks {mib(range_offline)}",
            ],
            ratio(range_first + range_second, stored),
            "bytes fetched by two reads / the files' size",
            "report",
            note="a cache of the byte ranges reads fetched (each range once); an offline read "
            "that needs a range no read fetched fails",
        ),
    ]
    return Outcome(rows=[report(ctx, r) for r in rows_out])
