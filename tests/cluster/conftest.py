"""A real Spark standalone cluster on loopback (one master and two workers, separate
processes), and a Spark Connect server running its driver on that cluster.

They are started from the pyspark distribution's own launchers (``bin/spark-class``,
``bin/spark-submit``), each in its own process group, and stopped with SIGTERM, then
SIGKILL. Everything runs on one machine, so every process sees the same local filesystem.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest
from harness.processes import TEST_JVM_OPTS

START_TIMEOUT_S = 240
WORKERS = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_home() -> Path:
    return Path(pyspark.__file__).parent


def cluster_env(work: Path) -> dict[str, str]:
    """Environment of the cluster's processes (and of drivers talking to it); the daemons
    run with the tests' JVM flags (the client compiler: tiny jobs, 2 cores)."""
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": TEST_JVM_OPTS,
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "work"),
    }


def start(args: list[str], log: Path, env: dict[str, str], launcher: str = "spark-class"):
    with open(log, "w") as out:  # a file: a full pipe would block the daemon
        return subprocess.Popen(
            [str(spark_home() / "bin" / launcher), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # own process group: launcher and JVM die together
        )


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass(frozen=True)
class Cluster:
    master_url: str
    ui_url: str
    env: dict[str, str]
    work: Path

    def status(self) -> dict:
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:
            return json.load(response)

    def logs(self) -> str:
        """The tail of every daemon log (for failure messages)."""
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.work.glob("*.log"))
        )


@pytest.fixture(scope="module")  # stopped once the cluster tests are done
def standalone_cluster(tmp_path_factory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("spark-cluster")
    env = cluster_env(work)
    port, ui_port = free_port(), free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", env, work)
    master = "org.apache.spark.deploy.master.Master"
    worker = "org.apache.spark.deploy.worker.Worker"
    procs = [
        start(
            [master, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)],
            work / "master.log",
            env,
        )
    ]
    try:
        for w in range(WORKERS):
            procs.append(
                start(
                    [
                        worker,
                        cluster.master_url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(work / f"worker-{w}"),
                    ],
                    work / f"worker-{w}.log",
                    env,
                )
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            assert not dead, f"cluster process exited: {dead}\n{cluster.logs()}"
            try:
                alive = [w for w in cluster.status()["workers"] if w["state"] == "ALIVE"]
                if len(alive) == WORKERS:
                    break
            except OSError:
                pass  # the master's UI is not up yet
            assert time.monotonic() < deadline, f"workers not registered\n{cluster.logs()}"
            time.sleep(0.5)
        yield cluster
    finally:
        for proc in reversed(procs):
            stop(proc)


@dataclass(frozen=True)
class ConnectServer:
    url: str  # sc://127.0.0.1:port
    env: dict[str, str]


@pytest.fixture
def connect_server(standalone_cluster) -> Iterator[ConnectServer]:
    """A Spark Connect server whose driver runs its jobs on the standalone cluster, in one
    executor: the classic driver's test spreads them over both workers; what Connect adds
    is the client's protocol, which executors never see."""
    work = standalone_cluster.work
    port = free_port()
    log = work / "connect-server.log"
    proc = start(
        [
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name",
            "Spark Connect server",
            "--master",
            standalone_cluster.master_url,
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.memory=512m",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            "spark.executor.cores=1",
            "--conf",
            "spark.cores.max=1",
            "--conf",
            "spark.sql.session.timeZone=UTC",
            # as the classic driver (demo_workload.py): tiny jobs, few tasks, the client
            # compiler in the executors too
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            "spark.default.parallelism=4",
            "--conf",
            f"spark.executor.extraJavaOptions={TEST_JVM_OPTS}",
        ],
        log,
        # the launcher sizes the server's JVM like a daemon's, from SPARK_DAEMON_MEMORY
        {**standalone_cluster.env, "SPARK_CONNECT_MODE": "0", "SPARK_DAEMON_MEMORY": "1g"},
        launcher="spark-submit",
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Spark Connect server started" not in log.read_text():
            assert proc.poll() is None, f"connect server exited\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no connect server\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield ConnectServer(f"sc://127.0.0.1:{port}", standalone_cluster.env)
    finally:
        stop(proc)
