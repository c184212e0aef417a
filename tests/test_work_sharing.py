"""How the suite shares its work out under pytest-xdist (``conftest.py``) names what exists: a
module moved or renamed would otherwise drop out of its group (and make its expensive fixture a
second time) or out of the longest-first order, silently."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST, SHARED_WORK, _scope

REPO = Path(__file__).resolve().parents[1]


def test_every_module_named_exists() -> None:
    named = set(SHARED_WORK) | {s for s in LONGEST_FIRST if s not in SHARED_WORK.values()}
    missing = sorted(m for m in named if not (REPO / m).is_file())
    assert not missing, f"no such test module: {missing}"


def test_every_group_is_of_two_modules_or_more_and_ordered() -> None:
    groups = set(SHARED_WORK.values())
    for group in groups:
        members = [m for m, g in SHARED_WORK.items() if g == group]
        assert len(members) >= 2, f"{group} shares nothing: {members}"
    assert groups <= set(LONGEST_FIRST), "a group of shared work is long by nature"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_a_grouped_module_is_scheduled_with_its_group() -> None:
    assert _scope("tests/collectors/flink/test_corpus.py::test_x") == "flink"
    assert _scope("tests/collectors/flink/test_e2e.py::test_y[a]") == "flink"
    assert _scope("tests/model/test_clock.py::test_z") == "tests/model/test_clock.py"
