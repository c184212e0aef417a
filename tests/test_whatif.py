"""``whatif`` changes to a scenario's TOML: operators, and chained vertices named like Flink's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.errors import ConfigError
from bpmon.scenario import load_scenario
from bpmon.whatif import Change, changed, parse_change

CHAINED = """
name = "chained"
chaining = true

[[operators]]
name = "source"
kind = "source"
rate = 100

[[operators]]
name = "a"
kind = "map"
parallelism = 2
inputs = [{ from = "source", partitioner = "rebalance" }]

[[operators]]
name = "b"
kind = "map"
parallelism = 2
inputs = [{ from = "a" }]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{ from = "b", partitioner = "rebalance" }]
"""


@pytest.fixture
def chained(tmp_path: Path) -> Path:
    path = tmp_path / "chained.toml"
    path.write_text(CHAINED)
    return path


def test_a_chain_takes_a_parallelism_for_all_its_operators(chained: Path) -> None:
    after = changed(load_scenario(chained), [parse_change("a -> b.parallelism=5")])
    assert (after.operator("a").parallelism, after.operator("b").parallelism) == (5, 5)
    assert after.operator("source").parallelism == 1  # the rest as written


def test_other_keys_name_one_operator_of_a_chain(chained: Path) -> None:
    with pytest.raises(ConfigError, match=r"is a chain of a, b; set cost_us on one of its"):
        changed(load_scenario(chained), [Change("a -> b", "cost_us", 10.0)])
    after = changed(load_scenario(chained), [parse_change("b.cost_us=10")])
    assert after.operator("b").cost_us == 10.0


def test_an_unknown_vertex_lists_the_operators(chained: Path) -> None:
    with pytest.raises(ConfigError, match=r"no operator 'a -> c'; known: source, a, b, sink"):
        changed(load_scenario(chained), [Change("a -> c", "parallelism", 3)])
