"""The remote job of bench scenario 14 (``bench.pipes``), launched by ``PipesSubprocessClient``
as its own process (``python -m bench.pipes_job``): its own local Spark with the bench's
settings, the minor the in-process side commits (``bench.data.updates``), a warm-up (the
table's state read, the rows computed), then ``job.commit`` timed alone. Extras: ``n``,
``p``, ``generation`` (the minor), ``conf`` (the Spark settings), ``timing`` (the file the
commit's seconds are written to)."""

from __future__ import annotations

import time
from pathlib import Path

from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.pipes import open_revision_job

from .data import updates


def main() -> None:
    with open_revision_job() as job:
        x = job.extras
        spark = build_spark_session(master="local[2]", app_name="bench-pipes-job", conf=x["conf"])
        rows = updates(spark, int(x["n"]), float(x["p"]), int(x["generation"]))
        # warm the fresh JVM as the long-lived in-process session is: the table's state read
        # (the commit compares the rows with it) and the rows computed
        job.dataset(spark).read(job.run.table).write.format("noop").mode("overwrite").save()
        rows.write.format("noop").mode("overwrite").save()
        start = time.perf_counter()
        job.commit({job.run.table: rows})
        Path(x["timing"]).write_text(f"{time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
