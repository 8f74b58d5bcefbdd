"""Scoring assets (docs/concepts/consumers.md): exactly-once consumption, resets, reverse joins,
deletions."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
from revisions_pipeline import P1, P2, P3, Versions

from revisions_assets.core.errors import ConsumerPositionConflictError
from revisions_assets.core.log.layout import LOG_DIR
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.base import LocalStorage
from revisions_assets.core.write import transaction
from revisions_assets.dagster import (
    RevisionsIOManager,
    revisions_automation_sensor,
    upstream_changes_sensor,
)
from revisions_assets.dagster.resources.resolver import range_hint
from revisions_assets.dagster.unmaterialized import TAG_REFUSED

pytestmark = pytest.mark.dagster


def positions(pipe) -> dict[str, int]:
    """The scoring table's recorded positions, by upstream table."""
    head = pipe.dataset("out").revisions("scores")[-1]
    return {p.table: p.sequence for p in head.upstream}


def counting_reads(opened: Counter[str], read: Counter[str]):
    """``RevisionLog.refresh`` counting, per root, the logs opened (read whole: checkpoint,
    entries, health) and every read (an open, or a probe for entries committed since)."""
    original = RevisionLog.refresh

    def refresh(self: RevisionLog):
        opened[self.storage.uri] += not self._loaded
        read[self.storage.uri] += 1
        return original(self)

    return refresh


def failure_of(result: dg.ExecuteInProcessResult) -> str:
    (event,) = [e for e in result.all_events if e.is_step_failure]
    return event.step_failure_data.error.to_string()


def test_consumes_only_new_revisions_exactly_once(pipe, caplog):
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    first = pipe.meta(pipe.run(pipe.scores, P1), pipe.scores)
    assert first["kind"] == "major" and first["rows"] == 3
    lineage = {
        column: sorted((d.asset_key.to_user_string(), d.column_name) for d in deps)
        for column, deps in first["dagster/column_lineage"].deps_by_column.items()
    }
    assert lineage == {  # ids and copied columns from the input, the score from its values
        "entity": [("features", "entity")],
        "grp": [("features", "grp")],
        # what the scorer may read: the input's values and the reference's join column
        "score": [
            ("features", "events"),
            ("features", "grp"),
            ("features", "total"),
            ("groups", "grp"),
        ],
    }
    assert positions(pipe) == {"features": 1, "groups": 1}

    pipe.run(pipe.features, P2)  # features revision 2: a and d
    pipe.fail_scoring = True
    failed = pipe.run(pipe.scores, P2, raise_on_error=False)
    assert not failed.success and "injected failure" in failure_of(failed)
    assert len(pipe.dataset("out").revisions()) == 1  # a failed run commits nothing
    assert positions(pipe) == {"features": 1, "groups": 1}

    pipe.fail_scoring = False
    # each log is opened once per run, through one handle: the consumer's (its checks, run
    # with it, read through the same handle) and each input's, whose log is read twice
    # (opened, then the run's one snapshot): the slice, the changes pinned at its head and a
    # reference's rows the scored entities join to (its state at the head) read that snapshot
    opened: Counter[str] = Counter()
    read: Counter[str] = Counter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RevisionLog, "refresh", counting_reads(opened, read))
        retry = pipe.meta(pipe.run(pipe.scores, P2, with_checks=True), pipe.scores)
    out, main, ref = (pipe.dataset(name).root for name in ("out", "main", "ref"))
    assert opened == {out: 1, main: 1, ref: 1}
    assert (read[main], read[ref]) == (2, 2)
    assert retry["kind"] == "minor" and retry["rows"] == 2  # a and d, processed once
    assert positions(pipe) == {"features": 2, "groups": 1}
    consumed = {p["table"]: (p["from"], p["to"]) for p in retry["upstream_positions"]}
    assert consumed == {"features": (1, 2), "groups": (1, 1)}  # shown in the UI
    assert retry["upstream_data_versions"] == {"features": "features@2", "groups": "groups@1"}
    assert retry["data_version"] == "scores@2" and retry["partitions"] == P2
    assert pipe.state("out", "scores")["a"]["score"] == 10.0  # the day-2 total of a, weight 1

    # nothing new upstream: a run of a scored day, or of a day without upstream data, neither
    # recomputes nor commits anything, and does not mark the day as materialized
    for day in (P2, "2024-01-20"):
        again = pipe.run(pipe.scores, day)
        assert again.success and pipe.partitions(again, pipe.scores) == []
    assert len(pipe.dataset("out").revisions()) == 2

    # a concurrent duplicate that wins the race: another run of the same day commits after
    # ours validated its positions and before ours creates its log entry. Ours loses the
    # put-if-absent, re-validates, and must fail with a position conflict instead of
    # committing the same changes twice
    pipe.run(pipe.features, P3)
    out_root = str(Path(pipe.dataset("out").root).resolve())
    create_entry = LocalStorage.create_exclusive
    rivals: list[str] = []

    def rival_first(storage: LocalStorage, rel: str, data: bytes) -> bool:
        is_entry = rel.startswith(f"{LOG_DIR}/") and rel.endswith(".json")
        if is_entry and storage.uri == out_root and not rivals:
            rivals.append(rel)
            assert pipe.run(pipe.scores, P3).success  # the rival: same day, same changes
        return create_entry(storage, rel, data)

    caplog.set_level(logging.INFO, logger=transaction.__name__)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalStorage, "create_exclusive", rival_first)
        raced = pipe.run(pipe.scores, P3, raise_on_error=False)
    assert rivals, "the rival run never ran: the race was not forced"
    assert not raced.success
    assert ConsumerPositionConflictError.__name__ in failure_of(raced)
    lost = [r for r in caplog.records if "lost the race" in r.getMessage()]
    assert len(lost) == 1 and out_root in lost[0].getMessage()  # the re-check, not the first
    revs = pipe.dataset("out").revisions()
    assert len(revs) == 3 and positions(pipe)["features"] == 3  # only the rival committed


def test_upstream_reset_reference_change_and_deletions(pipe):
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    pipe.run(pipe.scores, P1)
    pipe.run(pipe.features, P2)
    pipe.run(pipe.features, P3)  # e appears, b is deleted upstream
    # a run must materialize the days its changes cover: asked for P3 alone, it is refused
    # from the logs alone (before the run asks for its Spark session): nothing committed or
    # consumed, nothing materialized, no step failed; the run names the range to launch (a
    # tag, and an ERROR that says what requests the right range in this project)
    sessions: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RevisionsIOManager, "session", lambda self: sessions.append("started"))
        refused = pipe.run(pipe.scores, P3)
    assert sessions == []
    assert refused.success and not refused.get_asset_materialization_events()
    run = pipe.instance.get_run_by_id(refused.run_id)
    assert run.tags[TAG_REFUSED] == "materialize 2024-01-02...2024-01-03"
    (said,) = [e.message for e in pipe.instance.all_logs(refused.run_id) if e.level >= 40]
    assert "ScoringRangeError" in said and "materialize 2024-01-02...2024-01-03 instead" in said
    # it names what requests the right range in the run's code location (an in-process run
    # has none), and in a code location the sensors that target the asset
    assert "once a revisions_automation_sensor targets the asset; no sensor" in said
    sensors = [revisions_automation_sensor(pipe.assets), upstream_changes_sensor([pipe.scores])]
    defs = dg.Definitions(assets=pipe.assets, sensors=sensors, resources=pipe.resources)
    repository = defs.get_repository_def()
    step = SimpleNamespace(assets_def=pipe.scores, repository_def=repository)  # a run's step
    assert range_hint(step, pipe.scores.key) == (
        "its automation condition requests exactly that, on the sensors 'revisions_automation' "
        "and 'revisions_upstream_changes_sensor' of this code location"
    )
    assert positions(pipe) == {"features": 1, "groups": 1}
    both = pipe.run(pipe.scores, partitions=(P2, P3))  # the days the changes cover: one run
    assert pipe.partitions(both, pipe.scores) == [P2, P3]
    minor = pipe.meta(both, pipe.scores)
    assert minor["kind"] == "minor"
    assert (minor["rows"], minor["tombstones"]) == (4, 1)  # a, d, e scored; b's score deleted
    scores = pipe.state("out", "scores")
    assert set(scores) == {"a", "c", "d", "e"}

    # a reference row changes: exactly the entities joined to it are re-scored
    pipe.groups.loc[pipe.groups["grp"] == "g2", "weight"] = 10.0
    ref = pipe.meta(pipe.run(pipe.groups_asset), pipe.groups_asset)
    assert ref["kind"] == "minor" and ref["rows"] == 1  # only the changed row is written
    rescored = pipe.meta(pipe.run(pipe.scores, P3), pipe.scores)
    assert rescored["kind"] == "minor" and rescored["rows"] == 3
    (head,) = pipe.dataset("out").revisions("scores")[-1:]
    written = pipe.dataset("out").read("scores", with_revision=True)
    touched = {r["entity"] for r in written.filter(written._revision == head.name).collect()}
    assert touched == {"c", "d", "e"}  # the g2 entities, nothing else
    assert pipe.state("out", "scores")["e"]["score"] == 50.0
    assert pipe.state("out", "scores")["a"]["score"] == scores["a"]["score"]

    # an unchanged reference snapshot commits nothing
    assert pipe.meta(pipe.run(pipe.groups_asset), pipe.groups_asset)["kind"] == "none"

    # an upstream major (code version change) resets the consumer: a major score revision
    pipe.build(Versions(features="2"))
    pipe.run(pipe.features, P3)
    reset = pipe.meta(pipe.run(pipe.scores, partitions=(P1, P3)), pipe.scores)
    assert reset["kind"] == "major" and reset["why"] == "upstream reset in features"
    # a soft major, written as a carrying major: only a's new score (b is already deleted)
    assert reset["rescored_entities"] == 1 and reset["rows"] - reset["tombstones"] == 1
    assert reset["dagster/row_count"] == 4
    assert set(pipe.state("out", "scores")) == {"a", "c", "d", "e"}
    assert pipe.state("out", "scores")["a"]["score"] == 11.0  # recomputed from the new major

    # and a scoring code version change makes the scores major on their own
    pipe.build(Versions(features="2", scores="2"))
    own = pipe.meta(pipe.run(pipe.scores, partitions=(P1, P3)), pipe.scores)
    assert own["kind"] == "major" and own["why"] == "code version changed: '1' -> '2'"
    # every entity re-scored (offered); a carrying major writes only the changed scores
    assert own["rows_offered"] == 4 and own["dagster/row_count"] == 4
