"""Levels, ratios, the samples/time disagreement, and the report lines of subtasks and vertices."""

from __future__ import annotations

import pytest

from bpmon.model.values import SubtaskWindow
from bpmon.rules.config import LevelRules
from bpmon.rules.levels import level_of, subtask_status, vertex_status

from .observations import sub, vertex

LEVELS = LevelRules()


@pytest.mark.parametrize(
    ("ratio", "level"),
    [(0.0, "OK"), (0.10, "OK"), (0.1001, "LOW"), (0.5, "LOW"), (0.5001, "HIGH"), (1.0, "HIGH")],
)
def test_level_thresholds_are_inclusive_upper_bounds(ratio: float, level: str) -> None:
    assert level_of(ratio, LEVELS) == level


def test_no_ratio_has_no_level() -> None:
    assert level_of(None, LEVELS) is None


@pytest.mark.parametrize(
    ("blocked", "level"), [(0, "OK"), (10, "OK"), (11, "LOW"), (50, "LOW"), (51, "HIGH")]
)
def test_levels_from_sample_counts_at_the_boundaries(blocked: int, level: str) -> None:
    sw = SubtaskWindow(index=0, thread="x (1/1)", samples=100, backpressured=blocked,
                       busy=100 - blocked)  # fmt: skip
    status = subtask_status(sw, LEVELS)
    assert status.ratio == pytest.approx(blocked / 100)
    assert status.level == level


def test_thresholds_come_from_the_rules() -> None:
    assert level_of(0.15, LevelRules(ok_max=0.2, low_max=0.6)) == "OK"
    assert level_of(0.55, LevelRules(ok_max=0.2, low_max=0.6)) == "LOW"


def test_subtask_without_samples_takes_its_level_from_the_time_accounting() -> None:
    status = subtask_status(sub(0, bp=0.5, busy=0.4, samples=0), LEVELS)
    assert status.ratio == pytest.approx(0.53)  # backPressuredTimeMsPerSecond / 1000
    assert status.level == "HIGH"
    assert not status.disagreement


def test_subtask_without_samples_or_time_accounting_has_no_ratio_and_no_level() -> None:
    status = subtask_status(sub(0, bp=0.5, busy=0.4, samples=0, timed=False), LEVELS)
    assert status.ratio is None and status.level is None


def test_subtask_without_samples_or_metrics_reports_nothing_invented() -> None:
    status = subtask_status(SubtaskWindow(index=3, thread="x (4/4)"), LEVELS)
    assert (status.ratio, status.level, status.metrics.busy_ratio, status.metrics.idle_ratio) == (
        None,
        None,
        None,
        None,
    )


def test_busy_and_idle_prefer_the_time_accounting_and_fall_back_on_samples() -> None:
    timed = subtask_status(sub(0, busy=0.6, drift=0.1), LEVELS)
    assert timed.metrics.busy_ratio == pytest.approx(0.55)  # time view: 0.6 - 0.1 / 2
    sampled = subtask_status(sub(0, busy=0.6, timed=False), LEVELS)
    assert sampled.metrics.busy_ratio == pytest.approx(0.6)
    assert sampled.metrics.idle_ratio == pytest.approx(0.4)


def test_disagreement_when_samples_and_time_accounting_differ_by_more_than_the_margin() -> None:
    assert subtask_status(sub(0, bp=0.5, busy=0.2, drift=0.25), LEVELS).disagreement
    assert not subtask_status(sub(0, bp=0.5, busy=0.2, drift=0.15), LEVELS).disagreement
    assert not subtask_status(sub(0, bp=0.5, busy=0.2, timed=False), LEVELS).disagreement
    assert not subtask_status(
        sub(0, bp=0.5, busy=0.2, drift=0.25), LevelRules(disagreement=0.3)
    ).disagreement


def test_vertex_takes_the_worst_subtask_max_ratios_and_summed_rates() -> None:
    v = vertex(
        "enrich",
        sub(0, bp=0.05, busy=0.9, rin=100, rout=90, in_pool=0.2, out_pool=0.5),
        sub(1, bp=0.62, busy=0.3, rin=300, rout=270, in_pool=0.9, out_pool=1.2),
        sub(2, samples=0, timed=False, rin=50, rout=45),
    )
    status = vertex_status(v, LEVELS)
    assert (status.level, status.ratio) == ("HIGH", pytest.approx(0.62))
    assert status.metrics.busy_ratio == pytest.approx(0.87)  # subtask 0, time view 0.9 - 0.03
    assert status.metrics.in_pool_usage == pytest.approx(0.9)
    assert status.metrics.out_pool_usage == pytest.approx(1.2)  # above 1 with overdraft buffers
    assert status.metrics.records_in_per_s == pytest.approx(450)
    assert status.metrics.records_out_per_s == pytest.approx(405)
    assert [s.index for s in status.subtasks] == [0, 1, 2]
    assert status.parallelism == 3


def test_vertex_rates_are_unknown_when_one_subtask_lacks_them() -> None:
    status = vertex_status(vertex("v", sub(0, rin=100), sub(1)), LEVELS)
    assert status.metrics.records_in_per_s is None


def test_vertex_without_samples_or_time_accounting_has_no_level() -> None:
    quiet = vertex("v", sub(0, samples=0, timed=False), sub(1, samples=0, timed=False))
    status = vertex_status(quiet, LEVELS)
    assert status.level is None and status.ratio is None
