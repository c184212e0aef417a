"""Legacy TCP flow control on whole jobs: one connection per exchange, head-of-line within one.

Flink before 1.5 kept one TCP connection per remote task manager *and intermediate result* (the
result's random ``connectionIndex``): a full receiver stalled every channel of its exchange between
the two task managers, and no other exchange. Two jobs show both halves:

- issue 8's job, ``source p=2 -> rebalance -> map p=2 (slow) -> rebalance -> sink p=2`` on two
  task managers, which stopped moving records at all when both exchanges shared one connection per
  direction (each map subtask waited for the other to free a receive buffer): it keeps moving;
- a forward job ``events p=3 -> store p=3`` whose subtask 2 is slow: channels 0 and 2 of the one
  exchange cross the same connection (tm-0 -> tm-1), so subtask 2's full receiver starves
  subtask 0 and backpressures ``events (1/3)``, which credit-based flow control does not.

Both flush as Flink before 1.5 did (``output_flush = "finish"``: the partly filled buffer is sent
on), and the credit twin keeps that, so that only the flow control differs. All jobs run at once
after one shared warm-up; what is asserted is which state each subtask spent most of the measured
span in and whether records moved, never how fast.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import pytest

from bpmon.runtime.deployment import plan_deployment
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import TaskMetrics, counters, window_metrics
from bpmon.scenario import Scenario, parse_scenario
from tests.runtime.jobs import StartJob, dominant

WARMUP_S = 4.0
SPAN_S = 3.0

ISSUE_JOB = """
name = "two-exchanges"
[network]
flow_control = "tcp"
output_flush = "finish"
task_managers = 2
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 2000
[[operators]]
name = "map"
kind = "map"
parallelism = 2
cost_us = 2000
inputs = [{ from = "source", partitioner = "rebalance" }]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 2
cost_us = 20
inputs = [{ from = "map", partitioner = "rebalance" }]
"""
"""Issue 8's job: 4,000 records/s offered to 1,000/s of map capacity, both exchanges crossing
both directions between the two task managers."""

FORWARD_JOB = """
name = "forward-head-of-line"
seed = 3
[network]
flow_control = "tcp"
output_flush = "finish"
task_managers = 2
[[operators]]
name = "events"
kind = "source"
parallelism = 3
rate = 600
slot_sharing_group = "read"
[[operators]]
name = "store"
kind = "sink"
parallelism = 3
cost_us = 200
slow_subtasks = { 2 = 20.0 }
inputs = [{ from = "events", partitioner = "forward" }]
"""
"""events in group "read" (slots 0-2) on tm 0, 1, 0 and store in "default" (slots 3-5) on tm 1,
0, 1: channels 0 and 2 share connection tm-0 -> tm-1.
store (3/3) serves 250 records/s of the 600 offered; its siblings 3,000."""


@dataclass(frozen=True)
class Span:
    """One job's metrics over the measured span."""

    job: Job
    metrics: dict[str, list[TaskMetrics]]


def _credit(scenario: Scenario) -> Scenario:
    network = dataclasses.replace(scenario.network, flow_control="credit")
    return dataclasses.replace(scenario, name=f"{scenario.name}@credit", network=network)


@pytest.fixture(scope="module")
def spans(start_module_job: StartJob) -> dict[str, Span]:
    forward = parse_scenario(FORWARD_JOB)
    scenarios = {
        "issue": parse_scenario(ISSUE_JOB),
        "forward": forward,
        "forward@credit": _credit(forward),
    }
    jobs = {name: start_module_job(scenario) for name, scenario in scenarios.items()}
    time.sleep(WARMUP_S)
    first = {name: counters(job.tasks) for name, job in jobs.items()}
    time.sleep(SPAN_S)
    last = {name: counters(job.tasks) for name, job in jobs.items()}
    return {name: Span(job, window_metrics(first[name], last[name])) for name, job in jobs.items()}


def _show(ms: list[TaskMetrics]) -> str:
    return ", ".join(
        f"{m.thread}: in {m.records_in_per_s:.0f}/s out {m.records_out_per_s:.0f}/s "
        f"busy {m.busy_ms_per_s:.0f} idle {m.idle_ms_per_s:.0f} bp {m.backpressured_ms_per_s:.0f}"
        for m in ms
    )


def test_each_exchange_has_its_own_connections_under_tcp() -> None:
    plan = plan_deployment(parse_scenario(ISSUE_JOB))
    index = {g.consumer: g.connection_index for g in plan.gates}
    assert index["map"] != index["sink"]
    assert sorted(plan.connections) == sorted(
        (src, dst, index[v]) for v in ("map", "sink") for src, dst in ((0, 1), (1, 0))
    )
    credit = plan_deployment(_credit(parse_scenario(ISSUE_JOB)))
    assert sorted(credit.connections) == [(0, 1, 0), (1, 0, 0)]  # Flink 1.20: one per pair


@pytest.mark.slow
def test_the_job_of_issue_8_keeps_moving_records_under_tcp(spans: dict[str, Span]) -> None:
    """It stopped entirely when the two exchanges shared a connection per direction."""
    metrics = spans["issue"].metrics
    assert all(m.records_in_per_s > 0 for m in metrics["sink"]), _show(metrics["sink"])
    assert all(dominant(m) == "busy" for m in metrics["map"]), _show(metrics["map"])
    assert all(dominant(m) == "bp" for m in metrics["source"]), _show(metrics["source"])


@pytest.mark.slow
def test_a_full_receiver_stalls_the_other_channels_of_its_exchange(
    spans: dict[str, Span],
) -> None:
    """store (3/3)'s full receiver stops the connection it shares with store (1/3)'s channel:
    events (1/3) is backpressured and store (1/3) idles, though store (1/3) has capacity to
    spare; under credit events (1/3) keeps its pace. events (2/3), on its own connection, is
    never held back."""
    tcp, credit = spans["forward"], spans["forward@credit"]
    gates = {g.consumer_index: g for g in tcp.job.plan.gates}
    assert gates[0].connection(0) == gates[2].connection(0)  # both read from tm-0 on tm-1
    events, store = tcp.metrics["events"], tcp.metrics["store"]
    assert dominant(store[2]) == "busy", _show(store)
    assert dominant(events[0]) == "bp", _show(events)
    assert dominant(store[0]) == "idle", _show(store)
    assert dominant(events[1]) == "idle", _show(events)
    twin = credit.metrics["events"]
    assert dominant(twin[0]) == "idle", _show(twin)
    assert dominant(twin[2]) == "bp", _show(twin)
    assert credit.metrics["store"][0].records_in_per_s > store[0].records_in_per_s, (
        f"tcp: {_show(store)}; credit: {_show(credit.metrics['store'])}"
    )
