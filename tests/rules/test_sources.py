"""source-limited: a source chained with its bottleneck, on real runs of bpmon's runtime.

Each subtask of ``events`` is offered 300 records/s (a rate limit, so it reports FLIP-33's
``pendingRecords``), and its chained ``lookup`` takes 5 ms a record: ~200 records/s a subtask.
The chain is busy all the time, nothing waits for buffers, and the lag grows by ~200 records/s:
no vertex is backpressured, which is why the cause must come from the source itself.
"""

from __future__ import annotations

import math
from pathlib import Path

from bpmon.model.values import Report, RootCause
from bpmon.rules.config import RulesConfig
from bpmon.rules.sources import source_causes
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, drain, run_scenario

from .figures import evidence_problems, texts
from .observations import lag, observation, sub, vertex

RULES = RulesConfig()


def job(parallelism: int) -> str:
    return f"""
name = "source-limited"
duration_s = 4
chaining = true
[monitor]
warmup_s = 1.0
samples = 30
interval_ms = 30
[[operators]]
name = "events"
kind = "source"
parallelism = {parallelism}
rate = {600 / parallelism}
[[operators]]
name = "lookup"
kind = "map"
parallelism = {parallelism}
cost_us = 5000
inputs = [{{ from = "events" }}]
[[operators]]
name = "store"
kind = "sink"
cost_us = 20
inputs = [{{ from = "lookup", partitioner = "rebalance" }}]
"""


def report_of(text: str, tmp_path: Path) -> Report:
    ended = drain(run_scenario(parse_scenario(text), Settings(runs_dir=tmp_path)))
    assert ended.leaks == ()
    assert evidence_problems(ended.reports[0]) == []
    return ended.reports[0]


def limited(report: Report) -> list[RootCause]:
    return [c for c in report.root_causes or () if c.kind == "source-limited"]


def test_a_source_chained_with_its_bottleneck_is_source_limited_and_sized(
    tmp_path: Path,
) -> None:
    report = report_of(job(2), tmp_path)
    [cause] = limited(report)
    assert (cause.vertex, cause.subtasks) == ("events -> lookup", (0, 1))
    assert all(v.level == "OK" for v in report.vertices)  # what Flink's UI shows: all healthy
    assert cause.capacity_per_subtask is not None
    assert 150 <= cause.capacity_per_subtask <= 210  # 5 ms a record: at most 200/s
    assert cause.offered_rate is not None and 500 <= cause.offered_rate <= 700  # 2 x 300
    wanted = math.ceil(cause.offered_rate / (cause.capacity_per_subtask * 0.9))
    assert cause.recommended_parallelism == wanted
    assert any(f"~{cause.offered_rate:,.0f} offered" in line for line in texts(cause))
    assert f"{wanted} subtasks instead of 2" in cause.recommendation
    # the recommendation, applied by hand (a chain's members keep one parallelism), re-run
    again = report_of(job(wanted), tmp_path)
    assert limited(again) == []
    [chain] = [v for v in again.vertices if v.name == "events -> lookup"]
    assert chain.metrics.records_out_per_s is not None
    assert chain.metrics.records_out_per_s >= 0.9 * 600  # it now reads what it is offered


def test_without_pending_records_a_source_busy_on_every_subtask_is_named_its_lag_unknown() -> None:
    """A generator or file source reports no lag: busy 95% or more on every subtask and never
    blocked, it is the limit all the same (named less surely, not sized); a subtask at 90% is a
    source that keeps up, and nothing is named."""
    busy = vertex("src", sub(0, busy=0.98, rout=200), sub(1, busy=0.97, rout=200))
    [cause] = source_causes(observation(busy), RULES)
    assert (cause.kind, cause.vertex, cause.subtasks) == ("source-limited", "src", (0, 1))
    assert cause.confidence < 0.8 and cause.offered_rate is None
    assert cause.recommended_parallelism is None
    assert any("reports no pendingRecords: its lag" in line for line in texts(cause))
    assert "~400 records/s it reads" in cause.recommendation
    keeping_up = vertex("src", sub(0, busy=0.98, rout=200), sub(1, busy=0.90, rout=200))
    assert source_causes(observation(keeping_up), RULES) == []
    owed = vertex("src", *(sub(i, busy=0.98, rout=200, metrics=lag(100.0)) for i in range(2)))
    [sized] = source_causes(observation(owed), RULES)
    assert sized.offered_rate == 600.0 and sized.confidence == 0.8


def test_a_generator_source_chained_with_its_bottleneck_is_named_without_a_lag(
    tmp_path: Path,
) -> None:
    """The same chain read from a source without a rate limit (as fast as the chain takes it,
    reporting no pendingRecords, as Flink's DataGen or a file source): the chain is busy all
    the time, nothing is backpressured, and the chain is named with its lag unknown."""
    text = job(2).replace("rate = 300.0", "rate = 0")
    assert "rate = 0\n" in text
    report = report_of(text, tmp_path)
    [cause] = limited(report)
    assert (cause.vertex, cause.subtasks) == ("events -> lookup", (0, 1))
    assert cause.in_chain is not None and cause.in_chain.operator == "lookup"
    assert all(v.level == "OK" for v in report.vertices)
    assert cause.offered_rate is None and cause.recommended_parallelism is None
    assert any("reports no pendingRecords" in line for line in texts(cause))
    assert cause.capacity_per_subtask is not None and 150 <= cause.capacity_per_subtask <= 210


def test_a_backpressured_or_idle_source_is_not_source_limited() -> None:
    pressed = vertex("src", sub(0, bp=0.5, busy=0.45, rout=200, metrics=lag(100.0)))
    idle = vertex("src", sub(0, busy=0.3, rout=200, metrics=lag(100.0)))
    steady = vertex("src", sub(0, busy=0.98, rout=200, metrics=lag(1.0)))  # a lag standing still
    for v in (pressed, idle, steady):
        assert source_causes(observation(v), RULES) == []
