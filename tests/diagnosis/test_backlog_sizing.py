"""Sizing for the backlog: a job restarted with 1.8 M records waiting, on the real runtime.

1,200 records/s arrive (2 sources x 600) and 900,000 records wait at each source; enrich (2
subtasks x 1 ms a record: 2,000/s) is saturated while it drains them at its 800/s of spare. The
arrival alone fits in 2 subtasks (1,200 / 2,000 = 60%); the backlog is the reason to scale:
1,800,000 / 1,800 s = 1,000 records/s more, 2,200 in all, ceil(2,200 / (1,000 x 0.9)) = 3
subtasks, which would drain it in 1,800,000 / (3,000 - 1,200) s = about 17 minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.model.signals import FLINK, Signal
from bpmon.model.values import Report
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, WatchPlan, watch

from ..rules.figures import line_problems

BACKLOG = """
name = "restarted-with-backlog"
duration_s = 12
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 600
backlog = 900000
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = 1000
inputs = [{ from = "source", partitioner = "rebalance" }]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{ from = "enrich", partitioner = "rebalance" }]
"""


def evidence_problems(report: Report) -> list[str]:
    """Every figure of the causes' evidence that disagrees with the field it describes."""
    return [
        problem
        for cause in report.root_causes or ()
        for line in cause.evidence
        for problem in line_problems(report, cause, line)
    ]


def diagnosed(tmp_path: Path, view: frozenset[Signal]) -> Report:
    target = RuntimeTarget(parse_scenario(BACKLOG), view=view)
    plan = WatchPlan(samples=40, interval_ms=50.0, bursts=1, warmup_s=3.0)
    *_, ended = watch(target, plan, Settings(runs_dir=tmp_path))
    assert ended.leaks == () and len(ended.reports) == 1, ended
    return ended.reports[0]


@pytest.mark.slow
def test_a_backlog_is_sized_for_and_said_how_long_it_takes_to_drain(tmp_path: Path) -> None:
    report = diagnosed(tmp_path, FLINK)
    cause = (report.root_causes or ())[0]
    assert (cause.vertex, cause.kind) == ("enrich", "slow-operator")
    assert cause.offered_rate == pytest.approx(1200, rel=0.1)  # the arrival, not the drain
    assert cause.backlog_records == pytest.approx(1_800_000, rel=0.05)
    assert cause.catch_up_rate == pytest.approx(cause.backlog_records / 1800)
    assert cause.recommended_parallelism == 3
    text = [line.text for line in cause.evidence]
    assert any("records/s more drain them within [sizing] catch_up_s" in t for t in text), text
    assert any(t.startswith("at that parallelism the backlog would drain in ~") for t in text)
    assert "more to drain its sources' backlog" in cause.recommendation
    assert evidence_problems(report) == []  # every figure against the field it describes


@pytest.mark.slow
def test_without_pending_records_the_catch_up_is_unknown_and_said_so(tmp_path: Path) -> None:
    report = diagnosed(tmp_path, FLINK - {Signal.PENDING_RECORDS})
    cause = (report.root_causes or ())[0]
    assert cause.vertex == "enrich"
    assert cause.backlog_records is None and cause.catch_up_rate is None
    text = [line.text for line in cause.evidence]
    assert any("report no pendingRecords: what they owe already" in t for t in text), text
    assert evidence_problems(report) == []
