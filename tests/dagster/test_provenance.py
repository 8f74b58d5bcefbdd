"""Issue 11 in Dagster: unchanged rows are not committed, soft majors re-score only what
changed, and the positions still move."""

from __future__ import annotations

from revisions_pipeline import P1, Versions


def test_soft_majors_rescore_only_changed_entities(pipe):
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    first = pipe.meta(pipe.run(pipe.scores, P1), pipe.scores)
    assert first["kind"] == "major" and "rescored_entities" not in first
    before = pipe.state("out", "scores")

    # the same day recomputed by the same code: every row unchanged, nothing committed
    assert pipe.meta(pipe.run(pipe.features, P1), pipe.features)["kind"] == "none"

    # a new features code version that changes no value: a major upstream, and the scores'
    # soft major re-scores nobody but records the new position
    pipe.build(Versions(features="2"))
    assert pipe.meta(pipe.run(pipe.features, P1), pipe.features)["kind"] == "major"
    soft = pipe.meta(pipe.run(pipe.scores, P1), pipe.scores)
    assert (soft["kind"], soft["rescored_entities"], soft["rows"]) == ("major", 0, 3)
    assert pipe.state("out", "scores") == before
    head = pipe.dataset("main").revisions("features")[-1].sequence
    assert pipe.dataset("out").upstream_position(pipe.dataset("main").root, "features") == head

    # a formula change that changes one entity's value: only that entity is re-scored
    pipe.events.loc[(pipe.events["entity"] == "c"), "value"] = 30
    pipe.build(Versions(features="3"))
    pipe.run(pipe.features, P1)
    changed = pipe.meta(pipe.run(pipe.scores, P1), pipe.scores)
    assert (changed["kind"], changed["rescored_entities"], changed["rows"]) == ("major", 1, 3)
    after = pipe.state("out", "scores")
    assert after["c"]["score"] == 60.0
    assert {k: v for k, v in after.items() if k != "c"} == {
        k: v for k, v in before.items() if k != "c"
    }
