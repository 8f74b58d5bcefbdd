"""A class-data-sharing archive of Spark's classes, so every JVM the tests start loads them
from one mapped file instead of parsing and verifying them from the jars again.

A Spark driver spends about half of its start-up loading and verifying some 20,000 classes;
with the archive a child's session starts and runs its first jobs in about 60% of the CPU
time (a local driver: ~10 core-seconds without, ~6 with). The suite starts dozens of JVMs
(crash and race writers, the command line, Dagster runs, Pipes jobs, the cluster).

``ensure()`` (``./dev.sh test`` runs ``python tests/harness/jvm_archive.py`` first) keeps
the archive in ``.setup/jvm-archive``, named by what it depends on (the JVM, pyspark's jars
and the tests' JVM flags): built once by a JVM that runs the engine's commits, reads and
maintenance and dumps the classes it loaded at its exit (``-XX:ArchiveClassesAtExit``),
checked by a second JVM, then moved into place. ``archive_option()`` gives the flags the
tests add to ``TEST_JVM_OPTS`` when the archive exists. The JVM itself checks that the
jars are those the archive was built from; a JVM with another class path (the s3a jars
first, as the tests' own sessions have them) loads from the jars as before, silently.
Without the archive the tests run the same, only slower.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: the flags every JVM of the tests runs with (see processes.TEST_JVM_OPTS)
BASE_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / ".setup" / "jvm-archive"
#: the JVM's class-data-sharing messages off
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def archive_path() -> Path:
    """Where the archive for this JVM, these jars and these flags lives."""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True)
    digest = hashlib.sha1(java.stderr.encode() + BASE_JVM_OPTS.encode())
    for jar in sorted(spark_jars().glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return FOLDER / f"spark-{digest.hexdigest()[:12]}.jsa"


def archive_option() -> str:
    """``-XX:SharedArchiveFile=...`` when the archive exists, else nothing. The JVM's CDS
    log is off: a JVM with another class path would print that it cannot use the archive
    (on stdout, where a command's JSON goes)."""
    try:
        path = archive_path()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path.exists() else ""


def workload(root: str) -> None:
    """What the tests' JVMs do most: commits, reads, change reads, compaction, vacuum."""
    from datetime import UTC, datetime, timedelta

    from revisions_assets import RevisionedDataset, build_spark_session

    spark = build_spark_session(
        master="local[2]", conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    )
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    day = datetime(2024, 1, 1, tzinfo=UTC)

    def rows(lo: int, hi: int, d: int):
        return spark.range(lo, hi).selectExpr("id", "id % 7 AS grp", f"id * {d} AS v")

    ds.commit({"t": rows(0, 50, 1)}, timestamp=day, is_major=True, version="v1")
    ds.commit({"t": rows(40, 60, 2)}, timestamp=day + timedelta(days=1), is_major=False)
    gone = spark.createDataFrame([(3, True)], "id long, _deleted boolean")
    ds.commit({"t": gone}, timestamp=day + timedelta(days=2), is_major=False)
    ds.read("t", with_revision=True).groupBy("grp").count().collect()
    ds.read("t", as_of=day + timedelta(days=1)).join(rows(0, 10, 3), "id").count()
    ds.changes("t", since_sequence=1).df.collect()
    ds.history("t").count()
    ds.maintenance.compact("t")
    ds.maintenance.vacuum(retain=timedelta(0), grace=timedelta(0))
    ds.maintenance.verify()
    jvm = spark.sparkContext._gateway.proc  # pyspark's launcher process, exec'd into the JVM
    spark.stop()
    jvm.stdin.close()  # the gateway exits on EOF, and dumps the archive as it exits
    jvm.wait(timeout=600)


def build(path: Path) -> None:
    """Run the workload in a JVM that dumps its classes at exit, check the archive, move it
    into place (a truncated archive would crash every JVM that maps it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob("spark-*.jsa"):
        stale.unlink()
    partial = path.with_suffix(".partial")
    log = path.with_suffix(".log")
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{BASE_JVM_OPTS} -XX:ArchiveClassesAtExit={partial}"}
    with tempfile.TemporaryDirectory() as tmp, open(log, "w") as out:
        code = [sys.executable, __file__, "workload", str(Path(tmp) / "dataset")]
        subprocess.run(code, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)
    if not partial.exists():
        raise RuntimeError(f"the JVM wrote no archive (see {log})")
    check = subprocess.run(
        ["java", f"-XX:SharedArchiveFile={partial}", "-cp", f"{spark_jars()}/*", "-version"],
        capture_output=True,
        check=False,
    )
    if check.returncode:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM archive does not load: {check.stderr.decode()[-2000:]}")
    partial.replace(path)


def ensure() -> Path | None:
    """The archive, built if it is missing; None (and a note) if it cannot be built."""
    path = archive_path()
    if path.exists():
        return path
    print("[setup] a class-data archive of Spark's classes for the tests' JVMs", file=sys.stderr)
    try:
        build(path)
    except (OSError, subprocess.SubprocessError, RuntimeError) as failed:
        print(f"[setup] no JVM archive, the tests run without it: {failed}", file=sys.stderr)
        return None
    return path


if __name__ == "__main__":
    if sys.argv[1:2] == ["workload"]:
        workload(sys.argv[2])
    else:
        ensure()
