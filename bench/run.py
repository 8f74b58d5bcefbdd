"""The benchmark command: ``python -m bench.run [--scale S] [--reps R] [--only a,b] [--out F]``.

Generates the data with Spark, runs each scenario (warm-up + repetitions, medians,
ratios printed as it goes) and writes results.md and a PNG of the scaling scenarios.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import deltalake
import pyspark
from pyspark.sql import SparkSession

from .delta import against_delta
from .executors import executors
from .feast import training_sets
from .harness import BASE_N, Config, Context, Outcome
from .history import changes_of_last, commit_latency
from .layout import layout
from .lifecycle import maintenance
from .long_log import long_logs
from .memory import driver_memory
from .pipes import pipes_commit
from .plot import plot
from .provenance import soft_major, unchanged_rows_skipped
from .reader import reading_without_a_jvm
from .results import RunInfo, load_average, summary, write
from .s3_reads import reads_on_object_storage
from .scenarios import incremental_scoring, minor_vs_major, read_after_minors
from .spark_source import spark_source
from .training import training_set

Scenario = Callable[[Context], Outcome]

#: every scenario, in the issue's order: (number, name) -> function
SCENARIOS: dict[tuple[str, str], Scenario] = {
    ("1", "minor_major"): minor_vs_major,
    ("2", "read_after_minors"): read_after_minors,
    ("3", "commit_latency"): commit_latency,
    ("4", "changes_history"): changes_of_last,
    ("5", "incremental_scoring"): incremental_scoring,
    ("6", "delta"): against_delta,
    ("7", "memory"): driver_memory,
    ("8", "maintenance"): maintenance,
    ("9", "unchanged_rows_skipped"): unchanged_rows_skipped,
    ("10", "soft_major"): soft_major,
    ("11", "training_set"): training_set,
    ("12", "reader"): reading_without_a_jvm,
    ("13", "executors"): executors,
    ("14", "pipes"): pipes_commit,
    ("15", "feast"): training_sets,
    ("16", "s3"): reads_on_object_storage,
    ("17", "layout"): layout,
    ("18", "long_log"): long_logs,
    ("19", "spark_source"): spark_source,
}

BENCH = Path(__file__).resolve().parent


def spark_conf(config: Config) -> dict[str, str]:
    return {
        "spark.driver.memory": config.driver_memory,
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
    }


def select(only: Iterable[str] | None) -> dict[tuple[str, str], Scenario]:
    """The scenarios named (by number or name) in ``only``; all when None."""
    if not only:
        return dict(SCENARIOS)
    wanted = {w.strip() for w in only if w.strip()}
    chosen = {key: fn for key, fn in SCENARIOS.items() if wanted & set(key)}
    unknown = wanted - {part for key in chosen for part in key}
    if unknown:
        names = ", ".join(f"{n} ({name})" for n, name in SCENARIOS)
        raise SystemExit(f"unknown scenario(s) {sorted(unknown)}; choose from {names}")
    return chosen


def run(
    ctx: Context,
    scenarios: dict[tuple[str, str], Scenario],
    out: Path,
    info: RunInfo,
) -> dict[str, Outcome]:
    """Run ``scenarios`` in order, then write results.md and the plot beside it."""
    outcomes: dict[str, Outcome] = {}
    start = time.perf_counter()
    for (number, name), scenario in scenarios.items():
        ctx.log(f"[{number} {name}] N={ctx.config.n:,} (load average {load_average():.1f})")
        before, t0 = load_average(), time.perf_counter()
        outcomes[name] = scenario(ctx)
        info.load[f"{number} {name}"] = (before, load_average())
        ctx.log(f"[{number} {name}] done in {time.perf_counter() - t0:.0f} s")
    info.seconds = time.perf_counter() - start
    cfg = ctx.config
    title = f"revisions-assets benchmarks, N = {cfg.n:,} x 11 columns, p = {cfg.p:.0%}"
    png = plot(outcomes, out.with_suffix(".png"), title)
    write(info, outcomes, out, png)
    for line in summary(outcomes):
        ctx.log(line)
    ctx.log(f"wrote {out}" + (f" and {png}" if png else ""))
    return outcomes


#: options that only say where files go: left out of the command a page shows
_PATH_OPTIONS = ("--out", "--workdir")


def shown_command(argv: Sequence[str]) -> str:
    """The command as the results page shows it, without the paths of the machine it ran on
    (``--out``, ``--workdir``)."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _PATH_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in _PATH_OPTIONS)):
            shown.append(arg)
    return " ".join(["python -m bench.run", shlex.join(shown)]).strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help=f"N = scale x {BASE_N:,}")
    parser.add_argument("--reps", type=int, default=Config.reps, help="timed repetitions")
    parser.add_argument("--warmup", type=int, default=Config.warmup, help="untimed warm-ups")
    parser.add_argument("--only", help="comma-separated scenario numbers or names")
    parser.add_argument("--out", type=Path, default=BENCH.parent / "docs" / "benchmarks" / "2m.md")
    parser.add_argument("--workdir", type=Path, default=BENCH / "data" / "run")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    args = parser.parse_args(argv)

    config = dataclasses.replace(
        Config(), n=int(BASE_N * args.scale), reps=args.reps, warmup=args.warmup
    )
    scenarios = select(args.only.split(",") if args.only else None)
    from revisions_assets.core.spark_session import build_spark_session

    conf = spark_conf(config)
    spark: SparkSession = build_spark_session(
        master="local[2]", app_name="revisions-assets-bench", conf=conf
    )
    spark.sparkContext.setLogLevel("ERROR")
    shutil.rmtree(args.workdir, ignore_errors=True)
    info = RunInfo(
        command=shown_command(sys.argv[1:] if argv is None else argv),
        config=config,
        spark_conf={"master": "local[2]", **conf},
        versions={"pyspark": pyspark.__version__, "deltalake": deltalake.__version__},
    )
    ctx = Context(spark, config, args.workdir, log=lambda s: print(s, flush=True))
    try:
        run(ctx, scenarios, args.out, info)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
