"""Real processes for crash and concurrency tests: kill at a marker, and race to a start line.

``kill_at_markers``: each process patches one step of its own work so that, on reaching
it, it writes a marker file and blocks; the harness waits for the marker and SIGKILLs
the process's whole group (Python driver, JVM, Python workers), so the kill point is
deterministic.

``killing_at``: the same kill for a victim started by someone else (a Pipes client).

``race``: every process prepares (imports, JVM, open handles), touches ``ready-<i>`` in
the work folder and waits for ``go``; the harness creates ``go`` once all are ready, so
they really contend, then waits for all of them and insists each exited with 0.

Output goes to files, never pipes: a full pipe would block a process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.jvm_archive import BASE_JVM_OPTS, archive_option
from harness.proc import process_stats

#: how long a process may take to reach its marker or to get ready (JVM start on a busy box)
START_TIMEOUT_S = 600
#: how long a race may run once started
RUN_TIMEOUT_S = 900


def group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is still in the process group."""
    return any(f[0] != "Z" and int(f[2]) == pgid for _, f in process_stats())


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with ``start_new_session`` and everything in its group."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_group_gone(proc.pid)


def wait_group_gone(pgid: int) -> None:
    """Wait until the JVM and Python workers of a killed group are gone too."""
    deadline = time.monotonic() + 60
    while group_alive(pgid):
        assert time.monotonic() < deadline, f"process group {pgid} alive after SIGKILL"
        time.sleep(0.05)


@contextmanager
def killing_at(marker: Path, timeout: float = START_TIMEOUT_S) -> Iterator[None]:
    """Around code that starts a victim this harness does not start itself (a Pipes
    client's subprocess, which makes itself a group leader with ``os.setsid()``): once the
    victim writes its pid to ``marker`` (``kill_points.stop_at`` with the pid as label),
    SIGKILL its process group. Fails if the marker never appears."""
    killed: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                pgid = int(marker.read_text())
                os.killpg(pgid, signal.SIGKILL)
                wait_group_gone(pgid)
                killed.append(pgid)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    yield
    watcher.join(timeout)
    assert killed, f"the victim never reached its kill point ({marker} not written)"


@dataclass
class Victim:
    """A process that will write ``marker`` at its kill point."""

    proc: subprocess.Popen
    marker: Path
    output: Path


#: tests/, so a victim can import harness.kill_points
TESTS = str(Path(__file__).resolve().parents[1])


#: JVM flags of every Spark driver the tests start (the session's and the children's): on
#: tiny data, JIT compilation and parallel GC threads are much of the CPU on 2 cores (the
#: client compiler alone runs the suite ~10% faster), and loading Spark's classes is much
#: of a JVM's start (jvm_archive.py: they come from a shared archive once it is built)
TEST_JVM_OPTS = f"{BASE_JVM_OPTS} {archive_option()}".strip()


def with_tests_on_path(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` (default: ours) with tests/ on PYTHONPATH, so a child imports ``harness``, and
    ``TEST_JVM_OPTS`` for the JVM its Spark session starts (spark-submit reads
    ``SPARK_SUBMIT_OPTS``)."""
    environment = dict(env if env is not None else os.environ)
    path = environment.get("PYTHONPATH", "")
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (TESTS, path) if p)
    environment.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTS)
    return environment


def start_victim(
    command: Sequence[str], marker: Path, output: Path, env: Mapping[str, str] | None = None
) -> Victim:
    environment = with_tests_on_path(env)
    with open(output, "w") as out:
        proc = subprocess.Popen(
            list(command),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,  # its own process group: the kill takes the JVM too
        )
    return Victim(proc, marker, output)


def kill_at_markers(victims: Mapping[str, Victim], timeout: float = START_TIMEOUT_S) -> None:
    """SIGKILL each victim's group as soon as its marker exists; fail if one exits first."""
    pending = dict(victims)
    try:
        deadline = time.monotonic() + timeout
        while pending:
            for label, victim in list(pending.items()):
                if victim.marker.exists():
                    kill_group(victim.proc)
                    del pending[label]
                elif victim.proc.poll() is not None:
                    output = victim.output.read_text()[-3000:]
                    pytest.fail(f"{label}: exited ({victim.proc.returncode}) early:\n{output}")
            assert time.monotonic() < deadline, f"no marker after {timeout}s: {sorted(pending)}"
            time.sleep(0.05)
    finally:
        for victim in victims.values():
            if victim.proc.poll() is None:
                kill_group(victim.proc)


#: the worker programs in this folder, launched by path
HARNESS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class CrashPlan:
    """What a crash test kills: ``worker`` (a program in tests/harness, run as
    ``python WORKER ROOT MARKER MODE``) once per mode of ``modes``, each on its own copy of
    the dataset ``prepare(root, spark)`` commits; ``prepare`` returns what the tests compare
    with after the crash."""

    worker: str
    modes: tuple[str, ...]
    prepare: Callable[[str, Any], Any]


def crash_copies(plan: CrashPlan, spark: Any, base: Path) -> tuple[dict[str, str], Any]:
    """Prepare the template in ``base``, copy it once per mode, start the worker on each copy
    and kill it at its marker: ``({mode: root}, what prepare returned)``."""
    template = str(base / "template")
    before = plan.prepare(template, spark)
    victims = {}
    for mode in plan.modes:
        root = str(base / mode)
        shutil.copytree(template, root)
        marker = base / f"{mode}.marker"
        command = [sys.executable, str(HARNESS / plan.worker), root, str(marker), mode]
        victims[mode] = start_victim(command, marker, base / f"{mode}.log")
    kill_at_markers(victims)
    return {mode: str(base / mode) for mode in plan.modes}, before


def race(
    commands: Sequence[Sequence[str]],
    work: Path,
    env: Mapping[str, str] | None = None,
    start_timeout: float = START_TIMEOUT_S,
    run_timeout: float = RUN_TIMEOUT_S,
) -> list[Path]:
    """Run ``commands`` (process i gets ``work`` and i in its arguments, by convention) from
    one start line; return their stdout files once all exited with 0."""
    environment = with_tests_on_path(env)
    procs, outputs = [], []
    for i, command in enumerate(commands):
        outputs.append(work / f"out-{i}")
        with open(outputs[-1], "w") as out, open(work / f"err-{i}", "w") as err:
            procs.append(
                subprocess.Popen(
                    list(command),
                    stdout=out,
                    stderr=err,
                    env=environment,
                )
            )
    try:
        deadline = time.monotonic() + start_timeout
        while not all((work / f"ready-{i}").exists() for i in range(len(procs))):
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    error = (work / f"err-{i}").read_text()[-3000:]
                    pytest.fail(f"process {i} exited early ({proc.returncode}):\n{error}")
            assert time.monotonic() < deadline, f"processes not ready after {start_timeout}s"
            time.sleep(0.05)
        (work / "go").touch()  # everyone is up: now they race
        for proc in procs:
            proc.wait(timeout=run_timeout)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for i, proc in enumerate(procs):
        assert proc.returncode == 0, (work / f"err-{i}").read_text()[-3000:]
    return outputs


#: runs ``python -m MODULE ARGS...`` as given after the program, and writes the process's
#: peak memory (VmHWM, in KiB: never ru_maxrss, which a child inherits) to the file
#: ``PEAK_FILE`` names as it exits
_PEAK_PROGRAM = """
import atexit, os, runpy, sys

def peak():
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["PEAK_FILE"], "w") as out:
        out.write(kib)

atexit.register(peak)
module = sys.argv.pop(1)
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class Measured:
    """A finished process and its peak memory (None when it died before it could tell)."""

    done: subprocess.CompletedProcess
    peak_mib: float | None


def run_measuring_peak(
    module: str,
    args: Sequence[str],
    work: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> Measured:
    """Run ``python -m module args`` in a fresh process (as a user types it), with its output
    captured; its peak memory as it exited (VmHWM). A process killed by a signal, or one
    that outlives ``timeout``, leaves none."""
    peak = work / f"peak-{uuid.uuid4().hex[:8]}"
    environment = {**with_tests_on_path(env), "PEAK_FILE": str(peak)}
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_PROGRAM, module, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
        check=False,
    )
    kib = peak.read_text().strip() if peak.exists() else ""
    return Measured(done, int(kib) / 1024 if kib else None)
