"""The suite runs Spark as users get it (``build_spark_session``: adaptive execution on);
this file aims at the one engine path that only adaptive execution reaches.

A carrying major counts the rows it was offered with an observation on the write job
(``write.transaction.observed_offers``). When the offer is empty, adaptive execution drops
that side of the join at run time, the observation then never fires, and the engine counts
the offer in a job of its own: without that fallback the commit failed.
"""

from __future__ import annotations

import logging

from harness.dates import day

from revisions_assets import RevisionedDataset

from .helpers import frame

SCHEMA = "id long, v long"


def test_an_empty_complete_offer_is_counted_without_the_observation(spark, root, caplog):
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 10), (2, 20)], SCHEMA)}, day(0), is_major=True)
    with caplog.at_level(logging.INFO, logger="revisions_assets.core.write.transaction"):
        # a complete new state (skip_unchanged major) that is empty: nothing to commit
        record = ds.commit(
            {"t": frame(spark, [], SCHEMA)}, day(1), is_major=True, skip_unchanged=True
        )
    assert "offered rows not observed by the write job" in caplog.text  # the fallback ran
    assert record is None and ds.head_sequence == 1
    # a non-empty offer is counted by the write job itself
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="revisions_assets.core.write.transaction"):
        record = ds.commit(
            {"t": frame(spark, [(1, 10), (3, 30)], SCHEMA)},
            day(2),
            is_major=True,
            skip_unchanged=True,
        )
    assert "offered rows not observed" not in caplog.text
    assert record is not None and record.tables["t"].rows_offered == 2
    assert sorted(ds.read("t").toPandas()["id"]) == [1, 3]
