"""Varying sources in a real job: a ramp, uneven subtasks and a backlog, one pipeline each.

The three pipelines run side by side in one job, read over the same windows: early (0.3-1.3 s,
the ramp and the drain under way) and late (3-4.5 s, the ramp at its top, the backlog gone).
Every pipeline has far more capacity than it is offered except where the backlog is drained, so
the sources emit what their schedules call for. Margins are wide: a loaded machine delays
threads, and the schedule, being absolute, catches up within a window.
"""

from __future__ import annotations

import time

import pytest

from bpmon.runtime.metrics import TaskMetrics, counters, window_metrics
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StartJob

JOB = """
name = "varying-sources"
[network]
task_managers = 1

[[operators]]
name = "ramped"
kind = "source"
rate = 400
rate_profile = { shape = "ramp", to = 1600, over_s = 2 }
[[operators]]
name = "ramped-sink"
kind = "sink"
inputs = [{ from = "ramped" }]

[[operators]]
name = "uneven"
kind = "source"
parallelism = 2
rate = 300
subtask_rates = { "1" = 1200 }
[[operators]]
name = "uneven-sink"
kind = "sink"
parallelism = 2
inputs = [{ from = "uneven" }]

[[operators]]
name = "lagging"
kind = "source"
rate = 200
backlog = 2500
record_bytes = 1000
[[operators]]
name = "drain"
kind = "map"
cost_us = 500
inputs = [{ from = "lagging" }]
[[operators]]
name = "drain-sink"
kind = "sink"
inputs = [{ from = "drain" }]
"""
"""The drain takes at most 2,000 records/s: 1,800/s beyond the 200/s arriving, so the 2,500
waiting are gone after about 1.4 s. Its records are large, so the buffers between the source
and the drain hold only a few hundred of them: the rest is pending at the source."""

Windows = dict[str, dict[str, list[TaskMetrics]]]


@pytest.fixture(scope="module")
def windows(start_module_job: StartJob) -> tuple[Windows, int]:
    job = start_module_job(parse_scenario(JOB, "varying.toml"))
    first_pending = job.tasks["lagging"][0].limiter
    assert first_pending is not None
    reading = first_pending.schedule()
    assert reading is not None
    at_start = reading.pending
    time.sleep(0.3)
    a = counters(job.tasks)
    time.sleep(1.0)
    b = counters(job.tasks)
    time.sleep(1.7)
    c = counters(job.tasks)
    time.sleep(1.5)
    d = counters(job.tasks)
    return {"early": window_metrics(a, b), "late": window_metrics(c, d)}, at_start


@pytest.mark.slow
def test_a_ramp_rises_to_its_top(windows: tuple[Windows, int]) -> None:
    """Early the ramp runs near 400 + 1,200 x 0.8 / 2 = 880/s (its mean over 0.3-1.3 s), late
    at its top, 1,600/s."""
    early, late = windows[0]["early"]["ramped"][0], windows[0]["late"]["ramped"][0]
    assert early.records_out_per_s == pytest.approx(880, rel=0.25), early
    assert late.records_out_per_s == pytest.approx(1600, rel=0.15), late
    assert late.records_out_per_s > 1.4 * early.records_out_per_s


@pytest.mark.slow
def test_uneven_subtasks_each_emit_their_own_rate(windows: tuple[Windows, int]) -> None:
    slow, fast = windows[0]["late"]["uneven"]
    assert slow.records_out_per_s == pytest.approx(300, rel=0.15), slow
    assert fast.records_out_per_s == pytest.approx(1200, rel=0.15), fast


@pytest.mark.slow
def test_a_backlog_is_pending_at_the_start_then_drained_at_the_jobs_speed(
    windows: tuple[Windows, int],
) -> None:
    spans, at_start = windows
    assert at_start >= 2000  # reported from the start (the buffers hold only a few hundred)
    early, late = spans["early"]["lagging"][0], spans["late"]["lagging"][0]
    drain = spans["early"]["drain"][0]
    assert early.pending_records_growth_per_s is not None
    # while draining, the source emits what the map takes (at most 2,000/s), well above 200/s,
    # and its lag falls by that beyond the 200/s arriving
    assert early.records_out_per_s > 3 * 200, early
    assert drain.records_in_per_s <= 2000 * 1.05, drain
    assert early.pending_records_growth_per_s == pytest.approx(
        200 - early.records_out_per_s, abs=150
    )
    # drained: the schedule alone, nothing left pending
    assert late.pending_records is not None and late.pending_records < 100, late
    assert late.records_out_per_s == pytest.approx(200, rel=0.2), late
