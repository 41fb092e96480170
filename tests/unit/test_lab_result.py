"""The lab's pure parts: headline gains, the guard's verdict, the report's text, the catalog."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from minipulsar.lab.catalog import SCENARIO_MODULES, scenarios
from minipulsar.lab.gallery import headline_line
from minipulsar.lab.report import render_markdown
from minipulsar.lab.result import BASELINE, TUNED, Guard, Headline, ScenarioResult, percentile, stdev


def result(baseline: float, tuned: float, better: str = "lower", margin: float = 2.0) -> ScenarioResult:
    return ScenarioResult(
        scenario="s",
        title="A title",
        source="a report",
        finding="a finding",
        disk="EMULATED-HDD (…)",
        profile="quick",
        seed=7,
        variants={BASELINE: "x=false", TUNED: "x=true"},
        guard=Guard("figure", margin),
        headlines=[Headline("figure", "ms", baseline, tuned, better, "75 → 40 MB/s")],  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("baseline", "tuned", "better", "gain"),
    [(100, 25, "lower", 4.0), (25, 100, "lower", 0.25), (0.2, 0.8, "higher", 4.0), (5, 0, "lower", math.inf)],
)
def test_gain_says_how_many_times_better_the_tuned_run_is(baseline, tuned, better, gain) -> None:
    assert Headline("f", "u", baseline, tuned, better).gain == pytest.approx(gain)


def test_the_finding_counts_as_reproduced_only_at_the_guards_margin() -> None:
    assert result(100, 40).reproduced
    assert not result(100, 60).reproduced


def test_the_report_states_the_verdict_the_settings_and_the_reports_figure() -> None:
    text = render_markdown(result(100, 60))
    assert "Finding NOT reproduced" in text and "x=false" in text and "x=true" in text
    assert "75 → 40 MB/s" in text and "EMULATED-HDD" in text
    assert "not reproduced" in headline_line(result(100, 60))


def test_result_json_round_trips_with_infinite_gains_as_null() -> None:
    document = json.loads(json.dumps(result(5, 0).to_json()))
    assert document["reproduced"] is True and document["headlines"][0]["gain"] is None


def test_statistics_helpers() -> None:
    assert stdev([2.0, 4.0]) == 1.0 and stdev([3.0]) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0 and math.isnan(percentile([], 0.5))


def test_the_catalog_has_every_scenario_the_issue_names(tmp_path: Path) -> None:
    names = set(scenarios())
    assert len(names) == len(SCENARIO_MODULES)
    assert names == {
        "bookie-load-aware",
        "quarantine-probabilistic",
        "shedder-threshold",
        "placement-lrruw",
        "dispatcher-precise-flow",
        "cache-readers",
        "cache-mark-delete",
        "hdd-reads-push-writes",
        "publish-throttling",
        "bundle-split",
    }
