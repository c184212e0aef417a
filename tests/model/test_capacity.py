"""The one capacity definition: the mean of records handled / busy over busy-enough subtasks."""

from __future__ import annotations

import pytest

from bpmon.model.capacity import (
    MIN_BUSY,
    capacity_per_subtask,
    explained,
    parallelism_change,
    subtask_capacity,
)
from bpmon.rules.config import RulesConfig, load_rules


def test_a_vertex_s_capacity_is_the_mean_of_its_subtasks_not_the_median() -> None:
    # 500/s at 50%, 1,000/s at 100%, 1,000/s at 50%: 1,000, 1,000 and 2,000 at 100% busy. The
    # vertex takes 4,000 records/s: 1,333 per subtask (the median would say 1,000).
    figures = [(500.0, 500.0, 0.5), (1000.0, 1000.0, 1.0), (1000.0, 1000.0, 0.5)]
    assert capacity_per_subtask(figures, 0.1) == pytest.approx(4000 / 3)


def test_a_subtask_under_min_busy_or_moving_nothing_gives_no_figure() -> None:
    assert subtask_capacity((30.0, 30.0, 0.03), 0.1) is None  # 3% busy: noise
    assert subtask_capacity((100.0, 100.0, 0.1), 0.1) == pytest.approx(1000)
    assert subtask_capacity((0.0, 0.0, 1.0), 0.1) is None  # busy, but no record to divide
    assert subtask_capacity((500.0, 500.0, None), 0.1) is None
    idle = [(17831 * 0.03, 0.0, 0.03), (7261 * 0.03, 0.0, 0.03)]
    assert capacity_per_subtask(idle, 0.1) is None  # what is not measured is not compared
    assert capacity_per_subtask([*idle, (900.0, 900.0, 0.9)], 0.1) == pytest.approx(1000)


def test_a_source_s_figure_is_its_records_out() -> None:
    assert subtask_capacity((0.0, 1800.0, 0.9), 0.1) == pytest.approx(2000)
    assert subtask_capacity((None, 1800.0, 0.9), 0.1) == pytest.approx(2000)


def test_the_rules_hold_the_one_min_busy_and_the_shipped_file_says_the_same() -> None:
    assert RulesConfig().capacity.min_busy == MIN_BUSY
    assert load_rules(None).capacity.min_busy == MIN_BUSY


def test_a_parallelism_change_is_said_in_one_wording() -> None:
    assert parallelism_change("enrich", 2, 6) == "enrich runs 6 subtasks instead of 2"
    assert parallelism_change("enrich", 2, 2) is None
    assert parallelism_change("enrich", None, 6) is None
    changes = ["enrich runs 6 subtasks instead of 2", "sink runs 2 subtasks instead of 1"]
    assert explained("parse went OK -> HIGH", changes) == (
        "parse went OK -> HIGH; enrich runs 6 subtasks instead of 2, sink runs 2 subtasks "
        "instead of 1: the parallelism changed between the runs"
    )
    assert explained("parse went OK -> HIGH", []) == "parse went OK -> HIGH"
