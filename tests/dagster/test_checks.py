"""Asset checks pass on good data and fail on crafted bad datasets; checks and sensors never
write to storage."""

from __future__ import annotations

import os

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from revisions_pipeline import P1, P2, P3, P4, Versions

from revisions_assets.dagster import code_version_sensor, upstream_changes_sensor

pytestmark = pytest.mark.dagster


def files_under(base: str) -> dict[str, tuple[int, int]]:
    """Every file below ``base`` with its size and modification time."""
    out = {}
    for folder, _, names in os.walk(base):
        for name in names:
            st = os.stat(os.path.join(folder, name))
            out[os.path.join(folder, name)] = (st.st_size, st.st_mtime_ns)
    return out


def test_checks_pass_on_good_data_and_fail_on_crafted_bad_data(pipe):
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    pipe.run(pipe.features, P2)
    pipe.run(pipe.scores, partitions=(P1, P2))
    good = pipe.run_checks(pipe.checks(max_lag_revisions=1))
    assert sorted(good) == sorted(
        [
            "features:ids_unique_non_null",
            "features:log_integrity",
            "features:code_version",
            "features:compaction_due",
            "features:partition_freshness",
            "features:schema",
            "groups:ids_unique_non_null",
            "groups:log_integrity",
            "groups:code_version",
            "groups:compaction_due",
            "scores:ids_unique_non_null",
            "scores:log_integrity",
            "scores:code_version",
            "scores:compaction_due",
            "scores:partition_freshness",
            "scores:consumer_lag",
        ]
    )
    assert {name: e.passed for name, e in good.items() if not e.passed} == {}
    assert good["scores:consumer_lag"].metadata["max_revisions_behind"].value == 0

    # two upstream revisions the scores have not consumed, one of them with a negative total;
    # the partitioned checks run with each run, on the revision it wrote
    run3 = pipe.run(pipe.features, P3, with_checks=True)
    day3 = pipe.evaluations(run3)
    assert {name: e.passed for name, e in day3.items()} == {
        "features:partition_ids_unique_non_null": True,
        "features:partition_schema": True,
    }
    # the multi-check yields its outputs: no "did not yield or return expected outputs"
    logged = [e.user_message for e in pipe.instance.all_logs(run3.run_id)]
    assert not [m for m in logged if "did not yield" in m]
    negative = pd.DataFrame([(P4, "z", "g1", -5, False)], columns=pipe.events.columns)
    negative["day"] = pd.to_datetime(negative["day"]).dt.date
    pipe.events = pd.concat([pipe.events, negative], ignore_index=True)
    run4 = pipe.run(pipe.features, P4, with_checks=True, raise_on_error=False)
    day4 = pipe.evaluations(run4)
    assert not day4["features:partition_schema"].passed  # z's total is -5 in this revision
    # a blocking check: its failure fails the run (the revision is committed, and shown)
    (failure,) = [e for e in run4.all_events if e.is_step_failure]
    assert "blocking asset check failed" in failure.step_failure_data.error.to_string()
    assert pipe.dataset("main").head_sequence == 4
    assert "total" in str(day4["features:partition_schema"].metadata["errors"].value)
    assert day4["features:partition_ids_unique_non_null"].passed
    # and a data file of a visible revision rewritten with every id twice
    main = pipe.dataset("main")
    first = main.revisions("features")[0].tables["features"].files[0]
    path = os.path.join(main.root, first)
    table = pq.read_table(path)
    pq.write_table(pa.concat_tables([table, table]), path)
    crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
    if os.path.exists(crc):  # Hadoop's checksum of the old content
        os.remove(crc)

    # a stale description.parquet (a writer died before rewriting it): checks and sensors read
    # the logs and leave storage exactly as it is, even the file a writer would heal
    os.remove(os.path.join(main.root, "description.parquet"))
    before = files_under(pipe.base)
    for sensor in (code_version_sensor(pipe.assets), upstream_changes_sensor([pipe.scores])):
        with dg.build_sensor_context(instance=pipe.instance, resources=pipe.resources) as ctx:
            sensor(ctx)
    bad = pipe.run_checks(pipe.checks(max_lag_revisions=1))
    assert files_under(pipe.base) == before
    failed = {name for name, e in bad.items() if not e.passed}
    assert failed == {
        "features:schema",
        "features:ids_unique_non_null",
        "features:log_integrity",  # the rewritten file holds twice the rows its entry records
        "scores:consumer_lag",
    }
    # verify's id counts see every id twice; the schema check's read refuses the file and
    # the check fails naming it (never an execution error)
    assert bad["features:ids_unique_non_null"].metadata["duplicate_ids"].value == table.num_rows
    assert os.path.basename(first) in bad["features:schema"].metadata["error"].value
    assert bad["features:log_integrity"].metadata["files_damaged"].value == 1
    assert bad["scores:consumer_lag"].metadata["max_revisions_behind"].value == 2
    # a time bound: 2 revisions behind is fine under max_lag_revisions=5, but their age is not
    # under max_lag_seconds=0; an hour is enough for revisions committed seconds ago
    lag_checks = [
        c for c in pipe.checks(max_lag_revisions=5, max_lag_seconds=0) if "lag" in str(c.check_keys)
    ]
    lag = pipe.run_checks(lag_checks)["scores:consumer_lag"]
    behind = lag.metadata["features"].value
    assert not lag.passed and behind["revisions_behind"] == 2 and behind["seconds_behind"] > 0
    lag_checks = [
        c
        for c in pipe.checks(max_lag_revisions=5, max_lag_seconds=3600)
        if "lag" in str(c.check_keys)
    ]
    assert pipe.run_checks(lag_checks)["scores:consumer_lag"].passed

    # a data file referenced by the log disappears, and the features code moves to version 2
    scores = pipe.dataset("out")
    lost = scores.revisions("scores")[-1].tables["scores"].files[0]
    os.remove(os.path.join(scores.root, lost))
    pipe.build(Versions(features="2"))
    wanted = ("log_integrity", "code_version")
    result = pipe.run_checks(
        [c for c in pipe.checks() if any(w in str(c.check_keys) for w in wanted)]
    )
    assert {name for name, e in result.items() if not e.passed} == {
        "scores:log_integrity",
        "features:log_integrity",  # the file rewritten above still holds twice its rows
        "features:code_version",
    }
    assert result["scores:log_integrity"].metadata["files_missing"].value == 1
    stale = result["features:code_version"]  # stale code: reported as a warning
    assert stale.severity == dg.AssetCheckSeverity.WARN
    assert stale.metadata["head_version"].value == "1"
    assert stale.metadata["stale"].value == "code version changed: '1' -> '2'"
