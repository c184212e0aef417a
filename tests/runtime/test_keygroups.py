"""Flink's key groups (``runtime/keygroups.py``) against arithmetic, and keyed routing against them.

``MathUtils.murmurHash(int)`` is MurmurHash3 x86_32 (seed 0) of the int's four little-endian
bytes, made non-negative; its published test vectors (SMHasher's verification set) give the
expected values here: bytes ``00 00 00 00`` hash to ``0x2362F9DE``, ``FF FF FF FF`` to
``0x76293B50`` and ``21 43 65 87`` to ``0xF55B516B`` (a negative Java int, so Flink returns its
negation). Key groups and operator indices follow ``KeyGroupRangeAssignment``: checked against
the key group *ranges* Flink gives each operator (``computeKeyGroupRangeForOperatorIndex``), a
formula of its own. Records routed through a real result partition land where the key weights
and the keys' subtasks say (a seeded draw, with a tolerance of about 5 standard deviations).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.keygroups import (
    key_group,
    key_table,
    key_weights,
    murmur_hash,
    operator_index,
    subtask_of_key,
)
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.routing import Output
from bpmon.scenario.spec import KeySpec

Env = Callable[..., NetworkEnvironment]
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0, 0x2362F9DE),  # bytes 00 00 00 00
        (-1, 0x76293B50),  # bytes FF FF FF FF
        (0x87654321 - 2**32, 2**32 - 0xF55B516B),  # bytes 21 43 65 87; the hash is negative
    ],
)
def test_murmur_hash_matches_murmurhash3_test_vectors(code: int, expected: int) -> None:
    assert murmur_hash(code) == expected


def test_key_zero_lands_in_key_group_94_and_on_subtask_5_of_8() -> None:
    # 0x2362F9DE % 128: the low 7 bits of 0xDE = 0b1011110 = 94; subtask 94 * 8 // 128 = 5
    assert key_group(0, 128) == 94
    assert subtask_of_key(0, 128, 8) == 5
    assert subtask_of_key(0, 128, 3) == 2  # 94 * 3 // 128 = 282 // 128
    assert key_group(0, 1000) == 0x2362F9DE % 1000 == 54


@given(st.integers(INT_MIN, INT_MAX))
def test_murmur_hash_is_a_non_negative_java_int(code: int) -> None:
    assert 0 <= murmur_hash(code) <= INT_MAX
    assert murmur_hash(code) == murmur_hash(code + 2**32)  # only the 32 bits count


@given(st.data())
def test_each_key_group_goes_to_the_operator_whose_range_holds_it(data: st.DataObject) -> None:
    max_parallelism = data.draw(st.integers(1, 32768))
    parallelism = data.draw(st.integers(1, max_parallelism))
    group = data.draw(st.integers(0, max_parallelism - 1))
    index = operator_index(group, max_parallelism, parallelism)
    # Flink's KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    assert 0 <= index < parallelism
    assert start <= group <= end


@pytest.mark.parametrize("s", [0.5, 1.0, 1.3])
def test_zipf_weights_fall_as_a_power_of_the_rank(s: float) -> None:
    weights = key_weights(KeySpec(count=500, zipf=s))
    assert sum(weights) == pytest.approx(1.0)
    assert weights[0] / weights[1] == pytest.approx(2**s)
    assert weights[0] / weights[9] == pytest.approx(10**s)
    harmonic = sum(1 / k**s for k in range(1, 501))
    assert weights[0] == pytest.approx(1 / harmonic)


def test_hot_keys_carry_their_shares_and_the_rest_is_even() -> None:
    weights = key_weights(KeySpec(count=12, hot=(0.3, 0.1)))
    assert weights[:2] == (0.3, 0.1)
    assert weights[2:] == pytest.approx([0.06] * 10)  # 0.6 over the other 10 keys


def _route_keyed(env: NetworkEnvironment, keys: KeySpec, parallelism: int, total: int) -> list[int]:
    """Route ``total`` records through a keyed Output; how many each subtask received."""
    partition = env.create_partition(0, parallelism, "test-keys")
    table = key_table(keys, 128, parallelism)
    output = Output(partition, "hash", 100, 0, random.Random(3), keys=table)
    counts = [0] * parallelism
    for start in range(0, total, 200):
        output.write(list(range(start, min(total, start + 200))))
        partition.flush_all()
        with env.lock:
            for sub in partition.subpartitions:
                while (item := sub.poll()) is not None:
                    if isinstance(item, Buffer):
                        counts[sub.index] += len(cast(list[int], item.records))
                        item.recycle()
    return counts


def _expected_shares(weights: list[float], parallelism: int) -> list[float]:
    """Each subtask's share: the weights of the keys that key groups send to it."""
    shares = [0.0] * parallelism
    for key, weight in enumerate(weights):
        shares[subtask_of_key(key, 128, parallelism)] += weight
    return shares


def test_a_zipf_hot_subtask_receives_the_share_its_key_groups_give_it(make_env: Env) -> None:
    harmonic = sum(1 / k for k in range(1, 1001))
    weights = [1 / k / harmonic for k in range(1, 1001)]  # zipf = 1 over 1,000 keys
    expected = _expected_shares(weights, 8)
    counts = _route_keyed(make_env(), KeySpec(count=1000, zipf=1.0), 8, 40_000)
    assert sum(counts) == 40_000
    hot = max(range(8), key=lambda i: expected[i])
    assert hot == 5  # keys 0 (in group 94) and 1 land there
    assert expected[5] > 1.5 / 8  # a real hot spot, not a rounding of even shares
    for index in range(8):  # binomial sd at n = 40,000 is at most 0.0025: 5 sd = 0.0125
        assert counts[index] / 40_000 == pytest.approx(expected[index], abs=0.0125)


def test_hot_key_shares_land_on_their_key_groups_subtasks(make_env: Env) -> None:
    weights = [0.3, 0.1] + [0.6 / 98] * 98
    expected = _expected_shares(weights, 8)
    counts = _route_keyed(make_env(), KeySpec(count=100, hot=(0.3, 0.1)), 8, 40_000)
    assert expected[5] >= 0.4  # keys 0 and 1 share subtask 5
    for index in range(8):
        assert counts[index] / 40_000 == pytest.approx(expected[index], abs=0.0125)


def test_the_key_table_is_shared_between_outputs_of_one_edge() -> None:
    keys = KeySpec(count=300, zipf=0.9)
    assert key_table(keys, 128, 8) is key_table(KeySpec(count=300, zipf=0.9), 128, 8)
    assert sum(key_table(keys, 128, 8).shares()) == pytest.approx(1.0)
