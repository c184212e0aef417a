"""A job the runtime can still stop for good: legacy TCP flow control with aligned checkpoints.

``scenarios/tcp-aligned-stall.toml`` (beside this file) explains the cycle of waits. Once every
exchange has its own connections (Flink before 1.5), flow control alone cannot stop a job: every
wait of a task points downstream (output space) or at any input, and the job graph has no cycle.
An aligned checkpoint adds a wait on one particular input (the barrier of a channel not yet
aligned), and under ``tcp`` that barrier can sit on a connection stalled by the very receive
buffers the aligning task holds. Flink before 1.5 spilled those buffers to disk; bpmon does not,
so the stall is the runtime's own. It is kept as the case a diagnosis must report as stalled.

Here: over a span after the stall, no subtask moves a record and no checkpoint completes, and the
channel readings show the cycle; the same job under credit, or without checkpoints, moves.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bpmon.runtime.channelmetrics import ChannelReading, channel_readings
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import TaskMetrics, counters, window_metrics
from bpmon.scenario import CheckpointConfig, Scenario, load_scenario
from tests.runtime.jobs import StartJob

STALL = Path(__file__).resolve().parent / "scenarios" / "tcp-aligned-stall.toml"
WARMUP_S = 4.0
SPAN_S = 2.0
STALL_WITHIN_S = 40.0
"""How long the tcp job may take to stop for good: ~4 s on an idle machine, more under load."""


@dataclass(frozen=True)
class Span:
    job: Job
    metrics: dict[str, list[TaskMetrics]]
    checkpoints: int
    """Checkpoints completed during the span."""
    channels: list[ChannelReading]
    """At the end of the span."""


def _variants(scenario: Scenario) -> dict[str, Scenario]:
    credit = dataclasses.replace(scenario.network, flow_control="credit")
    return {
        "tcp": scenario,
        "credit": dataclasses.replace(scenario, name=f"{scenario.name}@credit", network=credit),
        "no-checkpoints": dataclasses.replace(
            scenario, name=f"{scenario.name}@none", checkpoints=CheckpointConfig()
        ),
    }


@pytest.fixture(scope="module")
def spans(start_module_job: StartJob) -> dict[str, Span]:
    """One span of every variant, the first in which the tcp job moved nothing (the tests then
    check it did stop), or the last before ``STALL_WITHIN_S`` (the tests then fail on it)."""
    jobs = {name: start_module_job(s) for name, s in _variants(load_scenario(STALL)).items()}
    deadline = time.monotonic() + STALL_WITHIN_S
    time.sleep(WARMUP_S)
    while True:
        first = {name: (counters(job.tasks), len(job.checkpoints())) for name, job in jobs.items()}
        time.sleep(SPAN_S)
        spans = {}
        for name, job in jobs.items():
            (start, done) = first[name]
            spans[name] = Span(
                job,
                window_metrics(start, counters(job.tasks)),
                len(job.checkpoints()) - done,
                channel_readings(job.tasks),
            )
        if _moved_nothing(spans["tcp"]) or time.monotonic() > deadline:
            return spans


def _moved_nothing(span: Span) -> bool:
    rates = [
        r
        for ms in span.metrics.values()
        for m in ms
        for r in (m.records_in_per_s, m.records_out_per_s)
    ]
    return span.checkpoints == 0 and not any(rates)


@pytest.mark.slow
def test_no_record_moves_and_no_checkpoint_completes(spans: dict[str, Span]) -> None:
    stalled = spans["tcp"]
    for vertex, ms in stalled.metrics.items():
        for m in ms:
            assert m.records_in_per_s == m.records_out_per_s == 0, (vertex, m)
    assert stalled.checkpoints == 0
    assert stalled.job.checkpoints() == ()  # not even the first one


@pytest.mark.slow
def test_the_channels_show_the_cycle_of_waits(spans: dict[str, Span]) -> None:
    """sink (1/2) blocked the channels whose barrier came; the remote one among them holds its
    gate's receive buffers; the channel whose barrier it waits for is not blocked but crosses
    the same connection, which is stalled."""
    mine = [r for r in spans["tcp"].channels if (r.consumer, r.consumer_index) == ("sink", 0)]
    waited = [r for r in mine if not r.blocked]
    holding = [r for r in mine if r.blocked and r.remote]
    assert [(r.producer, r.producer_index) for r in waited] == [("parse", 3)], mine
    assert [(r.producer, r.producer_index) for r in holding] == [("parse", 1)], mine
    (waited_for,), (holder,) = waited, holding
    assert waited_for.connection == holder.connection is not None
    assert waited_for.connection_stalled and holder.connection_stalled
    assert holder.queued_at_consumer == 2 * 2  # 2 remote channels x buffers_per_channel
    assert waited_for.queued_at_consumer == 0 and waited_for.backlog > 0


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["credit", "no-checkpoints"])
def test_the_same_job_under_credit_or_without_checkpoints_moves(
    spans: dict[str, Span], variant: str
) -> None:
    span = spans[variant]
    assert all(m.records_in_per_s > 0 for m in span.metrics["sink"]), span.metrics["sink"]
    if variant == "credit":
        assert span.checkpoints > 0
