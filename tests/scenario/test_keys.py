"""Scenario keys ``cost_cv``, ``keys`` and ``max_parallelism``: what they load as, and the one-line
error each bad value gets (the key, the value, what is expected)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.scenario import parse_scenario
from bpmon.scenario.spec import KeySpec
from tests.scenario.errors import error_of

HEAD = 'name = "job"\n[[operators]]\nname = "src"\nkind = "source"\nrate = 100\nparallelism = 2\n'


def job(
    work: str = "", edge: str = 'partitioner = "hash", keys = { count = 50, zipf = 1.1 }'
) -> str:
    """src (2) -> work (4) with ``edge`` on the input and ``work`` lines added."""
    return (
        HEAD + '[[operators]]\nname = "work"\nkind = "map"\nparallelism = 4\ncost_us = 100\n'
        f'inputs = [{{ from = "src", {edge} }}]\n{work}\n'
    )


def test_the_keys_load_as_written() -> None:
    work = parse_scenario(job("cost_cv = 0.7\nmax_parallelism = 256")).operator("work")
    assert work.inputs[0].keys == KeySpec(count=50, zipf=1.1)
    assert (work.cost_cv, work.max_parallelism) == (0.7, 256)
    hot = parse_scenario(job(edge='partitioner = "hash", keys = { count = 9, hot = [0.5, 0.2] }'))
    assert hot.operator("work").inputs[0].keys == KeySpec(count=9, hot=(0.5, 0.2))


@pytest.mark.parametrize(
    ("parallelism", "expected"), [(1, 128), (85, 128), (86, 256), (128, 256), (700, 2048)]
)
def test_the_default_max_parallelism_is_flinks(parallelism: int, expected: int) -> None:
    # Flink: roundUpToPowerOfTwo(p + p / 2), at least 128, at most 32768
    text = job().replace("parallelism = 4", f"parallelism = {parallelism}")
    assert parse_scenario(text).operator("work").max_parallelism == expected
    assert parse_scenario(text).operator("work").cost_cv == 0.0


BAD = [
    (
        job(edge='partitioner = "hash", skew = 0.5, keys = { count = 5, zipf = 1 }'),
        'keys "skew" and "keys" both set',
    ),
    (
        job(edge='partitioner = "rebalance", keys = { count = 5, zipf = 1 }'),
        'key "keys" is only valid with partitioner "hash" (this input uses "rebalance")',
    ),
    (job(edge='partitioner = "hash", keys = { zipf = 1 }'), 'key "count"'),
    (
        job(edge='partitioner = "hash", keys = { count = 5 }'),
        'expected exactly one of "zipf" and "hot"',
    ),
    (
        job(edge='partitioner = "hash", keys = { count = 5, zipf = 1, hot = [0.5] }'),
        'expected exactly one of "zipf" and "hot"',
    ),
    (
        job(edge='partitioner = "hash", keys = { count = 200000, zipf = 1 }'),
        'key "count" = 200000: expected a number of keys from 1 to 100,000',
    ),
    (job(edge='partitioner = "hash", keys = { count = 5, zipf = -1 }'), 'key "zipf" = -1'),
    (
        job(edge='partitioner = "hash", keys = { count = 5, hot = [0.7, 0.4] }'),
        "shares summing below 1 (they sum to 1.1)",
    ),
    (
        job(edge='partitioner = "hash", keys = { count = 1, hot = [0.3, 0.2] }'),
        "at most count = 1 shares",
    ),
    (job(edge='partitioner = "hash", keys = { count = 5, hot = [0] }'), "each share above 0"),
    (job(edge='partitioner = "hash", keys = { count = 5, hot = "x" }'), 'key "hot" = "x"'),
    (job(edge='partitioner = "hash", keys = { count = 5, zipf = 1, n = 2 }'), '"n"'),
    (job("cost_cv = -0.5"), 'key "cost_cv" = -0.5: expected a number >= 0'),
    (
        job("max_parallelism = 2"),
        'key "max_parallelism" = 2: expected an integer from the operator\'s parallelism (4)',
    ),
    (job("max_parallelism = 40000"), "to 32768"),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_a_bad_value_gets_one_line_naming_it(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error_of(tmp_path, text)
