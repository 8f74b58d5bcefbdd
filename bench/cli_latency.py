"""How fast the log commands answer on a long log: ``python -m bench.cli_latency``.

Stages a dataset of 10 and one of 10,000 revisions, and a consumer of each with as many
revisions (each recording its upstream position), through the log layer: records like
real commits, and the newest checkpoint a commit would have written (readers use no
other). Then times ``revisions log``, ``tables``, ``lag`` and ``verify`` (without
``--deep``: it parses every entry and lists every file) on both sizes, alternating
the sides: the whole process (``python -m revisions_assets``: interpreter start, imports
and the answer) and the answer alone (the command invoked in-process). These commands
never start Spark. Then ``revisions --help`` in the base install (the wheel without
extras, in a fresh environment: what a reader-only user starts) beside this development
environment. Prints Markdown tables; no figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner
from pyspark.sql.types import LongType, StructField, StructType

from revisions_assets.cli import cli
from revisions_assets.core.log.records import Revision, TableWrite, UpstreamPosition, canonical_json
from revisions_assets.core.log.revision_log import CHECKPOINT_INTERVAL, RevisionLog
from revisions_assets.core.storage.base import LocalStorage
from revisions_assets.core.timeutil import now_utc

from .harness import at
from .results import load_average

REPO = Path(__file__).resolve().parents[1]
SIZES = (10, 10_000)
COMMANDS = (("log",), ("tables",), ("lag",), ("verify",))


def stage(root: Path, count: int, upstream: str | None = None) -> None:
    """``count`` revisions of table ``t`` re-referencing one small file; a major first."""
    storage = LocalStorage(root)
    data = root / "seed" / "t" / "part-00000.parquet"
    data.parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), data)
    schema = StructType([StructField("id", LongType())])
    write = TableWrite(
        ("id",), canonical_json(schema.jsonValue()), "v1", 1, 0, ("seed/t/part-00000.parquet",), 1
    )
    log = RevisionLog(storage)
    for seq in range(1, count + 1):
        position = (UpstreamPosition(upstream, "t", seq),) if upstream else ()
        record = Revision(
            name=f"r{seq:05d}",
            timestamp=at(seq),
            is_major=seq == 1,
            sequence=seq,
            committed_at=now_utc(),
            tables={"t": write},
            version="v1",
            upstream=position,
        )
        if not log.try_append(record):
            raise RuntimeError(f"{root}: sequence {seq} was taken")
    if count >= CHECKPOINT_INTERVAL:  # what readers use: the newest checkpoint a commit wrote
        log.write_checkpoint(count - count % CHECKPOINT_INTERVAL)
    log.publish_description()


def timed_process(
    args: list[str], command: Sequence[str] = (sys.executable, "-m", "revisions_assets")
) -> tuple[float, float]:
    """Wall and CPU seconds of ``python -m revisions_assets ARGS`` (the console script's
    entry point; or ``command``) as a child process."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [*command, *args],
        check=True,
        stdout=subprocess.DEVNULL,
        # the installed package, not this tree (a base install must not see the repository)
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "COLUMNS": "160"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime


def timed_in_process(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of the command's answer alone (invoked in this process)."""
    cpu, start = time.process_time(), time.perf_counter()
    result = CliRunner().invoke(cli, args)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    if result.exit_code:
        raise RuntimeError(f"revisions {' '.join(args)}: {result.stderr}")
    return wall, used


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_latency")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for size in SIZES:
            upstream = Path(tmp) / f"features-{size}"
            stage(upstream, size)
            stage(Path(tmp) / f"scores-{size}", size, upstream=str(upstream))
            roots[size] = (str(upstream), str(Path(tmp) / f"scores-{size}"))
        print(f"load average before: {load_average():.1f}")
        print("| command | revisions | process wall (CPU) s | answer in-process wall (CPU) s |")
        print("|---|---:|---:|---:|")
        for command in COMMANDS:
            samples: dict[int, list[list[tuple[float, float]]]] = {s: [[], []] for s in SIZES}
            for _ in range(args.reps):
                for size in SIZES:  # alternating sides: load slows both alike
                    features, scores = roots[size]
                    argv = [*command, scores if command == ("lag",) else features]
                    samples[size][0].append(timed_process(argv))
                    samples[size][1].append(timed_in_process(argv))
            for size in SIZES:
                cells = [
                    f"{statistics.median(w for w, _ in runs):.2f} "
                    f"({statistics.median(c for _, c in runs):.2f})"
                    for runs in samples[size]
                ]
                print(f"| {command[0]} | {size:,} | {cells[0]} | {cells[1]} |")
        help_rows(Path(tmp) / "base-install", args.reps)
        print(f"load average after: {load_average():.1f}")


def help_rows(venv: Path, reps: int) -> None:
    """``revisions --help`` in a fresh base install (the wheel, no extra) and here."""
    wheelhouse = REPO / "tests" / "install" / "wheelhouse.py"
    subprocess.run([sys.executable, str(wheelhouse), "env", str(venv)], check=True)
    sides = {
        "base install (reader only)": [str(venv / "bin" / "revisions")],
        "development (every extra)": [sys.executable, "-m", "revisions_assets"],
    }
    samples: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    for _ in range(reps):
        for side, command in sides.items():  # alternating sides
            samples[side].append(timed_process(["--help"], command))
    print()
    print("| `revisions --help` | process wall (CPU) s |")
    print("|---|---:|")
    for side, runs in samples.items():
        wall, used = (statistics.median(x[i] for x in runs) for i in (0, 1))
        print(f"| {side} | {wall:.2f} ({used:.2f}) |")


if __name__ == "__main__":
    main()
