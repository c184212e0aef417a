"""``state_mb`` and ``spill_cost_us``: the spill cost a scenario gives each operator, and errors.

Expected figures are worked out by hand from docs/scenario.md (Scheduling, step 5): a slot gets
``managed_memory_mb / slots_per_task_manager``; weights share it in proportion, sizes give what
they say; records missing memory are (state_mb - MB) / state_mb of all, each paying
``spill_cost_us`` more.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.model.errors import ScenarioError
from bpmon.scenario import load_scenario, parse_scenario
from bpmon.service.whatif import changed, parse_change

JOB = """
name = "memory"

[cluster]
slots_per_task_manager = 2
managed_memory_mb = {tm_mb}

[[operators]]
name = "source"
kind = "source"
rate = 100

[[operators]]
name = "join"
kind = "map"
cost_us = 50
managed_memory = 1
inputs = [{{ from = "source" }}]

[[operators]]
name = "aggregate"
kind = "map"
cost_us = 200
{aggregate}
inputs = [{{ from = "join" }}]
"""

STATEFUL = "managed_memory = 1\nstate_mb = 512\nspill_cost_us = 400"


def job(aggregate: str = STATEFUL, tm_mb: float = 256) -> str:
    return JOB.format(aggregate=aggregate, tm_mb=tm_mb)


def test_an_operator_whose_state_outgrows_its_share_pays_the_spill_cost() -> None:
    # 256 MB / 2 slots = 128 MB a slot; weights 1 and 1: 64 MB each; 448 of 512 MB miss.
    aggregate = parse_scenario(job()).operator("aggregate")
    assert aggregate.managed_mb == 64
    assert aggregate.spill_share == pytest.approx(448 / 512)
    assert aggregate.cost_of(0) == pytest.approx(200 + 400 * 448 / 512)  # 550 us


def test_state_that_fits_costs_nothing_more_and_the_default_spill_cost_is_100_us() -> None:
    fits = parse_scenario(job("managed_memory = 1\nstate_mb = 64")).operator("aggregate")
    assert (fits.spill_share, fits.cost_of(0)) == (0.0, 200.0)
    default = parse_scenario(job("managed_memory = 1\nstate_mb = 128")).operator("aggregate")
    assert default.spill_cost_us == 100
    assert default.cost_of(0) == pytest.approx(200 + 100 * (128 - 64) / 128)  # 250 us


def test_slow_subtasks_multiply_the_spill_cost_too() -> None:
    slow = STATEFUL + "\nslow_subtasks = { 0 = 2.0 }"
    aggregate = parse_scenario(job(slow)).operator("aggregate")
    assert aggregate.cost_of(0) == pytest.approx(2 * (200 + 400 * 448 / 512))


@pytest.mark.parametrize(
    ("setting", "tm_mb", "cost_us"),
    [
        ("aggregate.managed_memory=15", 256, 200 + 400 * (512 - 120) / 512),  # 15/16 of 128 MB
        ("aggregate.state_mb=64", 256, 200),  # the working set fits its 64 MB
        ("aggregate.spill_cost_us=0", 256, 200),
    ],
)
def test_whatif_changes_the_spill_cost(
    tmp_path: Path, setting: str, tm_mb: float, cost_us: float
) -> None:
    path = tmp_path / "memory.toml"
    path.write_text(job(tm_mb=tm_mb))
    after = changed(load_scenario(path), [parse_change(setting)])
    assert after.operator("aggregate").cost_of(0) == pytest.approx(cost_us)


def test_state_without_managed_memory_is_checkpointed_state_and_never_spills() -> None:
    aggregate = parse_scenario(job("state_mb = 512")).operator("aggregate")
    assert aggregate.state_mb == 512 and aggregate.spill_share == 0.0
    assert aggregate.cost_of(0) == 200


def test_more_managed_memory_per_task_manager_removes_the_spill() -> None:
    # 2048 MB / 2 slots / 2 weights = 512 MB: the whole working set fits.
    assert parse_scenario(job(tm_mb=2048)).operator("aggregate").cost_of(0) == 200


@pytest.mark.parametrize(
    ("aggregate", "message"),
    [
        ("state_mb = 512\nspill_cost_us = 10", 'key "spill_cost_us" needs "managed_memory"'),
        ("managed_memory = 1\nspill_cost_us = 10", 'key "spill_cost_us" needs "state_mb"'),
        ("managed_memory = 1\nstate_mb = 0", 'key "state_mb"'),
        ("managed_memory = 1\nstate_mb = 64\nspill_cost_us = -1", 'key "spill_cost_us"'),
        ('managed_memory = 1\nstate_mb = "lots"', 'key "state_mb"'),
    ],
)
def test_bad_state_settings_are_one_line_errors(aggregate: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(job(aggregate))
    text = str(info.value)
    assert message in text and '"aggregate"' in text and "\n" not in text
