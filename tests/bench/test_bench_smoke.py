"""Every benchmark scenario runs end to end at a tiny scale, so the benchmarks cannot rot.

Structure only: each scenario produced figures and a finite ratio, results.md and the
plot were written. Never times (the machine is shared; performance lives in bench/).
"""

from __future__ import annotations

import math

import pytest

from bench.harness import Config, Context
from bench.results import RunInfo

# bench.run is imported by the tests that use it: it imports every scenario's libraries
# (deltalake, matplotlib, Dagster), and every pytest worker collects this module


@pytest.mark.slow
@pytest.mark.long
def test_every_scenario_produces_figures_and_a_ratio(spark, tmp_path):
    from bench.run import SCENARIOS, run

    config = Config.smoke()
    ctx = Context(spark, config, tmp_path / "work")
    out = tmp_path / "results.md"
    outcomes = run(ctx, SCENARIOS, out, RunInfo(command="smoke", config=config, spark_conf={}))

    assert list(outcomes) == [name for _, name in SCENARIOS]
    for name, outcome in outcomes.items():
        assert outcome.rows, f"scenario {name} produced no result row"
        for row in outcome.rows:
            assert row.figures and all(row.figures), f"{name}: a row without figures"
            assert math.isfinite(row.ratio) and row.ratio > 0, f"{name}: ratio {row.ratio}"
            assert row.verdict in {"met", "not met", "reported"}
    text = out.read_text()
    assert text.count("\n| ") == 1 + sum(len(o.rows) for o in outcomes.values())
    assert "| 2 latest-state read | k = 3 minors, without compaction |" in text
    assert "| 2 time travel |" in text and "| 8 compaction vs major |" in text
    assert out.with_suffix(".png").stat().st_size > 10_000


def test_scenarios_are_chosen_by_number_or_name():
    from bench.run import select

    assert [name for _, name in select(["1", "delta"])] == ["minor_major", "delta"]
    with pytest.raises(SystemExit, match="unknown scenario"):
        select(["99"])
