"""What every scenario shares: the configuration, timing by median, and the result rows.

Paired measurements alternate their two sides (A, B, A, B …) so that a noisy,
shared machine slows both sides alike; the ratio of the two medians is the figure
that matters, never an absolute time. Beside wall time, each sample records the CPU
time spent by the driver process and its JVM: on a machine shared with other jobs,
wall time inflates with the load while CPU time mostly does not, so the CPU-time
ratio is a cross-check of the wall-time ratio (it cannot see waiting, e.g. on I/O).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
from pyspark.sql import DataFrame, SparkSession

#: the logical calendar of every benchmark dataset
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
BASE_N = 2_000_000


def at(step: float) -> datetime:
    """EPOCH + ``step`` hours: a strictly increasing timestamp per revision."""
    return EPOCH + timedelta(hours=step)


@dataclass(frozen=True)
class Config:
    """Sizes of one benchmark run; ``smoke()`` shrinks every axis but runs the same code."""

    n: int = BASE_N
    p: float = 0.01
    reps: int = 3
    warmup: int = 1
    ks: tuple[int, ...] = (1, 10, 100, 1_000)
    real_minors: int = 10  # minors committed through ds.commit in scenario 2; the rest are staged
    policy_from_k: int = 100  # scenario 2 reads from here on with the default compact_after
    time_travel_back: int = 50  # scenario 2: time travel this many minors back in the last k
    compaction_minors: int = 21  # scenario 8: minors a compaction takes (the policy's number)
    vacuum_revisions: int = 1_000  # scenario 8: revisions a vacuum dry run judges
    log_sizes: tuple[int, ...] = (10, 100, 1_000, 10_000)
    history_sizes: tuple[int, ...] = (10, 1_000)
    memory_scales: tuple[int, ...] = (1, 4)
    reader_minors: int = 10  # scenario 12: the minors on the major the reader merges
    #: scenario 12 probes the reader's memory and an id lookup at N and at this multiple of N
    reader_scale: int = 4
    pipes_revisions: int = 1_000  # scenario 14: the log a Pipes run reads its slice from
    layout_history_revisions: int = 1_000  # scenario 17: the history one entity's is read from
    #: scenario 18: the lengths of the crafted logs opened and read, and read by Spark too
    #: (its file index lists every path a relation names: minutes past 20,000)
    long_log_sizes: tuple[int, ...] = (1_000, 10_000, 20_000, 100_000)
    long_log_spark_sizes: tuple[int, ...] = (1_000, 10_000, 20_000)
    stream_trigger_seconds: float = 5.0  # scenario 19: the change feed's processingTime
    driver_memory: str = "4g"
    #: the memory probe's master: local-cluster keeps the executor JVM apart from the driver's
    memory_master: str = "local-cluster[1,2,2048]"

    @property
    def scale(self) -> float:
        return self.n / BASE_N

    @classmethod
    def smoke(cls, n: int = 2_000) -> Config:
        return cls(
            n=n,
            reps=1,
            warmup=0,
            ks=(1, 3, 30),
            real_minors=2,
            policy_from_k=30,
            time_travel_back=5,
            compaction_minors=3,
            vacuum_revisions=40,
            log_sizes=(10, 40),
            history_sizes=(10, 30),
            memory_scales=(1,),  # one fresh-process probe: the smoke checks the structure
            reader_minors=3,
            reader_scale=1,  # the probes at N stand for both: no second dataset
            pipes_revisions=40,
            layout_history_revisions=30,
            long_log_sizes=(20, 100),  # both merges of the reader: a tree, then one pass
            long_log_spark_sizes=(20, 100),
            stream_trigger_seconds=1.0,
            driver_memory="1g",
            memory_master="local[1]",
        )


@dataclass
class Context:
    """A run: its Spark session, its configuration and a scratch folder per scenario."""

    spark: SparkSession
    config: Config
    workdir: Path
    log: Callable[[str], None] = print

    def folder(self, *parts: str) -> Path:
        path = self.workdir.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class Timing:
    """The samples of one measured operation (seconds) and their median."""

    label: str
    samples: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # CPU seconds (driver + its JVMs) per sample

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    def add(self, fn: Callable[[], object]) -> None:
        cpu, start = cpu_seconds(), time.perf_counter()
        fn()
        self.samples.append(time.perf_counter() - start)
        self.cpu.append(cpu_seconds() - cpu)

    def __str__(self) -> str:
        return f"{self.label} {fmt_seconds(self.median)}"


@dataclass
class Row:
    """One line of results.md: figures, the ratio, the goal and whether it is met."""

    scenario: str
    case: str
    figures: list[str]
    ratio: float
    ratio_label: str
    goal: str
    threshold: float | None = None  # the goal is ``ratio <= threshold``; None: report only
    note: str = ""
    cpu_ratio: float | None = None  # the same ratio in CPU time (see module docstring)

    @property
    def verdict(self) -> str:
        if self.threshold is None:
            return "reported"
        return "met" if self.ratio <= self.threshold else "not met"


@dataclass
class Outcome:
    """What a scenario returns: its rows, and series (x, y seconds) for the plot."""

    rows: list[Row] = field(default_factory=list)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    plot: tuple[str, str, str] | None = None  # (title, x label, y label)
    notes: list[str] = field(default_factory=list)


def fmt_seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.inf


def cpu_ratio(a: Timing, b: Timing) -> float:
    return ratio(a.cpu_median, b.cpu_median)


def cpu_seconds() -> float:
    """User + system CPU time of this process and its live child processes (the JVM)."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:  # ended meanwhile
            continue
    return total


def _log_timing(ctx: Context, t: Timing) -> None:
    samples = ", ".join(fmt_seconds(s) for s in t.samples)
    ctx.log(f"    {t}  (samples {samples}; CPU {fmt_seconds(t.cpu_median)})")


def measure(ctx: Context, label: str, fn: Callable[[], object]) -> Timing:
    """Warm up, then time ``reps`` runs of ``fn``."""
    for _ in range(ctx.config.warmup):
        fn()
    timing = Timing(label)
    for _ in range(ctx.config.reps):
        timing.add(fn)
    _log_timing(ctx, timing)
    return timing


def measure_pair(
    ctx: Context,
    a: tuple[str, Callable[[], object]],
    b: tuple[str, Callable[[], object]],
    before: Callable[[], object] | None = None,
) -> tuple[Timing, Timing]:
    """Warm up and time two operations alternately, so machine noise hits both alike.

    ``before`` (untimed) runs ahead of each pair, e.g. to commit the change both sides consume.
    """
    for _ in range(ctx.config.warmup):
        if before is not None:
            before()
        a[1]()
        b[1]()
    ta, tb = Timing(a[0]), Timing(b[0])
    for _ in range(ctx.config.reps):
        if before is not None:
            before()
        ta.add(a[1])
        tb.add(b[1])
    _log_timing(ctx, ta)
    _log_timing(ctx, tb)
    return ta, tb


def evaluate(df: DataFrame) -> None:
    """Force full evaluation without collecting: Spark reads everything into a no-op sink."""
    df.write.format("noop").mode("overwrite").save()


def report(ctx: Context, row: Row) -> Row:
    """Print a result row as soon as it is known (the run's progress output)."""
    cpu = f" (CPU-time ratio {row.cpu_ratio:.3f})" if row.cpu_ratio is not None else ""
    ctx.log(
        f"  => {row.scenario} [{row.case}] {row.ratio_label} = {row.ratio:.3f}{cpu}  "
        f"goal {row.goal}: {row.verdict}"
    )
    return row
