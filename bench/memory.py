"""Scenario 7: peak driver memory while reading the latest state and writing it to Parquet.

Each measurement runs in a fresh process (``python -m bench.memory``), so peaks are
never shared. A thread samples the RSS of the Python driver and of its JVMs with
psutil. Spark runs as ``local-cluster[1,2,MB]`` by default: the driver JVM and the
executor JVM are separate processes, so the driver's own memory is seen apart from the
executor's (in plain ``local`` mode, used by the smoke test because it starts faster,
one JVM is both, and its RSS follows the data processed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from .data import TABLE, entities, updates
from .harness import Context, Outcome, Row, ratio, report
from .scenarios import commit, new_dataset

MB = 2**20
EXECUTOR = "CoarseGrainedExecutorBackend"


class Sampler(threading.Thread):
    """Samples the RSS of this process, its driver JVM and executor JVMs every ``interval``."""

    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = {"python": 0, "driver_jvm": 0, "executor_jvm": 0, "driver_total": 0}
        self._done = threading.Event()
        self._me = psutil.Process()

    def sample(self) -> dict[str, int]:
        now = {"python": self._me.memory_info().rss, "driver_jvm": 0, "executor_jvm": 0}
        for child in self._me.children(recursive=True):
            try:
                if child.name() != "java":
                    continue
                kind = "executor_jvm" if EXECUTOR in " ".join(child.cmdline()) else "driver_jvm"
                now[kind] += child.memory_info().rss
            except psutil.Error:  # a process that just ended
                continue
        now["driver_total"] = now["python"] + now["driver_jvm"]
        return now

    def run(self) -> None:
        while not self._done.is_set():
            for key, value in self.sample().items():
                self.peak[key] = max(self.peak[key], value)
            time.sleep(self.interval)

    def stop(self) -> dict[str, int]:
        self._done.set()
        self.join()
        return self.peak


def probe(root: str, out: str, master: str, driver_memory: str) -> dict[str, float]:
    """In this (fresh) process: start Spark, read the latest state, write it to Parquet."""
    from revisions_assets import RevisionedDataset
    from revisions_assets.core.spark_session import build_spark_session

    spark = build_spark_session(
        master=master,
        app_name="bench-memory",
        conf={
            "spark.driver.memory": driver_memory,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
        },
    )
    try:
        ds = RevisionedDataset(root, spark=spark)
        spark.range(10).count()  # executors up: the baseline includes a started cluster
        sampler = Sampler()
        baseline = sampler.sample()
        sampler.start()
        start = time.perf_counter()
        ds.read(TABLE).write.mode("overwrite").parquet(out)
        seconds = time.perf_counter() - start
        peak = sampler.stop()
    finally:
        spark.stop()
    result = {f"peak_{k}_mb": v / MB for k, v in peak.items()}
    result.update({f"baseline_{k}_mb": v / MB for k, v in baseline.items()})
    result["seconds"] = seconds
    return result


def run_probe(ctx: Context, root: str, out: str) -> dict[str, float]:
    """Run ``probe`` in a fresh Python process and return what it measured."""
    cfg = ctx.config
    cmd = [sys.executable, "-m", "bench.memory", root, out, cfg.memory_master, cfg.driver_memory]
    paths = [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def driver_memory(ctx: Context) -> Outcome:
    cfg, spark = ctx.config, ctx.spark
    measured: dict[int, dict[str, float]] = {}
    for factor in cfg.memory_scales:
        n = cfg.n * factor
        ds = new_dataset(ctx, f"s7_x{factor}")
        commit(ds, entities(spark, n, 0), is_major=True)
        commit(ds, updates(spark, n, cfg.p, 1), is_major=False)
        measured[factor] = m = run_probe(ctx, ds.root, str(ctx.folder(f"s7_x{factor}", "out")))
        ctx.log(
            f"    {factor}x ({n:,} rows): peak python {m['peak_python_mb']:.0f} MB, "
            f"driver JVM {m['peak_driver_jvm_mb']:.0f} MB, executor JVM "
            f"{m['peak_executor_jvm_mb']:.0f} MB, read+write {m['seconds']:.1f} s"
        )
    lo, hi = cfg.memory_scales[0], cfg.memory_scales[-1]
    a, b = measured[lo], measured[hi]

    def fig(key: str) -> str:
        name = key.replace("_", " ")
        low, high = a[f"peak_{key}_mb"], b[f"peak_{key}_mb"]
        return f"{name}: {low:.0f} MB at {lo}x, {high:.0f} MB at {hi}x"

    executor = ""
    if a["peak_executor_jvm_mb"] > 0:
        growth = ratio(b["peak_executor_jvm_mb"], a["peak_executor_jvm_mb"])
        executor = f"; the executor JVM (not the driver) grew {growth:.2f}x"
    row = Row(
        "7 driver memory",
        f"latest state of {cfg.n * lo:,} vs {cfg.n * hi:,} rows -> Parquet",
        [fig("driver_total"), fig("python"), fig("driver_jvm"), fig("executor_jvm")],
        ratio(b["peak_driver_total_mb"], a["peak_driver_total_mb"]),
        f"driver peak RSS {hi}x / {lo}x",
        "no growth beyond noise (<= 1.10)",
        1.10,
        note=f"driver = Python process + driver JVM ({cfg.memory_master}){executor}",
    )
    out = Outcome(rows=[report(ctx, row)], plot=("7. driver peak RSS", "rows in the state", "MB"))
    out.series = {
        label: [(cfg.n * f, m[f"peak_{key}_mb"]) for f, m in measured.items()]
        for key, label in (
            ("driver_total", "driver: Python + driver JVM"),
            ("python", "Python process"),
            ("executor_jvm", "executor JVM"),
        )
    }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one driver-memory probe (run by bench.run)")
    parser.add_argument("root")
    parser.add_argument("out")
    parser.add_argument("master")
    parser.add_argument("driver_memory")
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.root, args.out, args.master, args.driver_memory)))


if __name__ == "__main__":
    main()
