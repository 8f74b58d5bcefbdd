"""Compaction and vacuum in Dagster (docs/concepts/lifecycle.md): the policy and forced compactions
reported in
the materialization metadata, the ``compaction_due`` check, and the vacuum job that keeps
what the scoring assets' recorded positions still need."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import pytest
from revisions_pipeline import P1, P2, P3, P4

from revisions_assets.dagster import TAG_FORCE_COMPACTION, revisions_resources, vacuum_job

pytestmark = pytest.mark.dagster


def use_policy(pipe, compact_after: int | None) -> None:
    pipe.resources = dict(
        revisions_resources(pipe.base, pipe.spark_resource, compact_after=compact_after)
    )


def change_day4(pipe) -> None:
    """New values for entity a on P4: a re-run of P4 then has a changed row to commit (an
    unchanged one is skipped, and a run that commits nothing compacts nothing new)."""
    pipe.events.loc[pipe.events["entity"].eq("a") & pipe.events["value"].ge(100), "value"] += 1


def test_policy_and_forced_compactions_in_metadata_and_the_compaction_due_check(pipe):
    use_policy(pipe, 2)  # compact when more than 2 revisions sit on the base
    metas = [pipe.meta(pipe.run(pipe.features, day), pipe.features) for day in (P1, P2, P3)]
    assert [m["compacted"] for m in metas] == [False, False, False]
    before = pipe.state("main", "features")
    fourth = pipe.meta(pipe.run(pipe.features, P4), pipe.features)
    assert fourth["kind"] == "minor" and fourth["sequence"] == 4
    assert fourth["compacted"] is True and fourth["compaction_sequence"] == 5
    ds = pipe.dataset("main")
    assert ds.read("features").count() == 4  # a, c, d, e
    assert (fourth["compaction_rows"], fourth["compaction_tombstones"]) == (5, 1)  # b deleted
    assert fourth["compaction_files"] >= 1
    assert [r.kind for r in ds.revisions()] == ["major", "minor", "minor", "minor", "compaction"]
    after = pipe.state("main", "features")
    assert after["a"]["total"] == 100 and {k: v for k, v in after.items() if k != "a"} == {
        k: v for k, v in before.items() if k != "a"
    }

    # no policy: nothing compacts on its own; the check warns past a stricter location policy
    use_policy(pipe, None)
    change_day4(pipe)
    pipe.run(pipe.features, P4)
    assert pipe.dataset("main").inspect.revisions_on_base("features") == 1
    checks = [c for c in pipe.checks() if "compaction_due" in str(c.check_keys)]
    use_policy(pipe, 0)
    due = pipe.run_checks(checks)["features:compaction_due"]
    assert not due.passed and due.severity == dg.AssetCheckSeverity.WARN
    assert due.metadata["revisions_on_base"].value == 1
    assert due.metadata["base"].value == ds.revisions()[4].name  # the compaction

    # a run tag forces one whatever the policy; so does the run config
    use_policy(pipe, None)
    change_day4(pipe)
    forced = pipe.meta(pipe.run(pipe.features, P4, tags={TAG_FORCE_COMPACTION: "1"}), pipe.features)
    assert forced["compacted"] is True and forced["compaction_sequence"] == forced["sequence"] + 1
    use_policy(pipe, 0)
    assert pipe.run_checks(checks)["features:compaction_due"].passed
    use_policy(pipe, None)
    change_day4(pipe)
    config = {"ops": {"features": {"config": {"force_compaction": True}}}}
    by_config = pipe.meta(pipe.run(pipe.features, P4, run_config=config), pipe.features)
    assert by_config["compacted"] is True
    assert pipe.state("main", "features")["a"]["total"] == 103  # three changes of day 4


def vacuum(pipe, **config) -> dict:
    job = vacuum_job(pipe.assets)
    result = job.execute_in_process(
        run_config={"ops": {"revisions_vacuum_datasets": {"config": config}}},
        instance=pipe.instance,
        resources=pipe.resources,
    )
    return result.output_for_node("revisions_vacuum_datasets")


def test_vacuum_job_keeps_what_the_scoring_positions_need(pipe):
    use_policy(pipe, None)
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)  # 1 major
    pipe.run(pipe.features, P2)  # 2 minor
    pipe.run(pipe.scores, partitions=(P1, P2))  # consumes features up to sequence 2
    pipe.run(pipe.features, P3)  # 3 minor: not consumed yet
    pipe.run(pipe.features, P4, tags={TAG_FORCE_COMPACTION: "true"})  # 4 minor, 5 compaction
    main = pipe.dataset("main")
    names = {r.sequence: r.name for r in main.revisions()}

    # the job finds the consumers in the asset graph: scores read main and ref
    dry = vacuum(pipe, retain_days=0, grace_hours=0, dry_run=True)
    assert dry["main"]["consumers"] == ["out"] and dry["ref"]["consumers"] == ["out"]
    assert dry["out"]["consumers"] == []
    # minors 3 and 4 stay for the scores' next change read (since 2); minor 2 can go
    assert dry["main"]["revisions"] == [names[2]] and dry["main"]["entry"] is None
    without = main.maintenance.vacuum(
        retain=timedelta(0),
        grace=timedelta(0),
        dry_run=True,
    )
    assert sorted(without.revisions) == sorted([names[2], names[3], names[4]])
    assert len(main.revisions()) == 5  # a dry run commits nothing

    done = vacuum(pipe, retain_days=0, grace_hours=0)
    assert done["main"]["revisions"] == [names[2]] and done["main"]["entry"] is not None
    log = pipe.dataset("main").inspect.log()
    assert log.loc[log["sequence"] == 2, "vacuumed"].item()
    scored = pipe.meta(pipe.run(pipe.scores, partitions=(P3, P4)), pipe.scores)
    consumed = {p["table"]: (p["from"], p["to"]) for p in scored["upstream_positions"]}
    assert consumed["features"] == (2, 6)  # read 3 and 4 (kept); head 6 is the vacuum entry
    assert pipe.state("out", "scores")["a"]["score"] == 100.0
