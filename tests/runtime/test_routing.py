"""Partitioners (``routing.Output``) and operator volumes (``operators.Transform``), driven alone.

Records are written through a real result partition of a real network environment and read back
from its subpartitions, so what is checked is where the records really land. The expected shares
come from ``spec/scenario.md``: rebalance is round robin per record, hash spreads uniformly with
``skew`` of all records on subtask 0, broadcast copies every record to every subtask, forward keeps
the producer's subtask; a filter passes ``selectivity`` of its records, a flatmap emits ``fanout``
per record, a sink emits nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import cast

import pytest

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.operators import Transform
from bpmon.runtime.partition import ResultPartition
from bpmon.runtime.routing import Output
from bpmon.scenario import OperatorSpec

Env = Callable[..., NetworkEnvironment]
RECORD_BYTES = 100
CHUNK_SIZES = (1, 7, 64, 300, 5, 128)
"""Uneven chunks, as a task hands them over (part of an input buffer at a time)."""


def _route(
    env: NetworkEnvironment,
    partitioner: str,
    subpartitions: int,
    total: int,
    *,
    index: int = 0,
    skew: float | None = None,
    seed: int = 1,
) -> list[list[int]]:
    """Write records ``0..total-1`` through an Output; the records each subpartition received.

    The partition is flushed and drained after every chunk, so the pool never runs dry (a single
    thread blocking on its own full pool would hang the test).
    """
    partition = env.create_partition(0, subpartitions, f"test-{partitioner}")
    output = Output(partition, partitioner, RECORD_BYTES, index, random.Random(seed), skew)
    received: list[list[int]] = [[] for _ in range(subpartitions)]
    sent, turn = 0, 0
    while sent < total:
        size = min(CHUNK_SIZES[turn % len(CHUNK_SIZES)], total - sent)
        output.write(list(range(sent, sent + size)))
        sent, turn = sent + size, turn + 1
        partition.flush_all()
        _drain(env, partition, received)
    return received


def _drain(env: NetworkEnvironment, partition: ResultPartition, into: list[list[int]]) -> None:
    with env.lock:
        for sub in partition.subpartitions:
            while (item := sub.poll()) is not None:
                if isinstance(item, Buffer):
                    into[sub.index].extend(cast(list[int], item.records))  # the ints written
                    item.recycle()


def _shares(received: Sequence[Sequence[int]]) -> list[float]:
    total = sum(len(r) for r in received)
    return [len(r) / total for r in received]


# -- partitioners -----------------------------------------------------------------------------


def test_forward_keeps_every_record_in_order_on_one_channel(make_env: Env) -> None:
    received = _route(make_env(), "forward", 1, 2_000)
    assert received == [list(range(2_000))]


def test_rebalance_is_round_robin_per_record(make_env: Env) -> None:
    received = _route(make_env(), "rebalance", 4, 4_000, index=1)
    assert [len(r) for r in received] == [1_000] * 4
    # each subpartition holds every fourth record, in order, whatever the chunk boundaries
    for records in received:
        assert records == list(range(records[0], 4_000, 4))
    assert sorted(r[0] for r in received) == [0, 1, 2, 3]


def test_rebalance_spreads_evenly_when_the_total_does_not_divide(make_env: Env) -> None:
    received = _route(make_env(), "rebalance", 3, 1_001)
    assert sorted(len(r) for r in received) == [333, 334, 334]
    assert sorted(r for records in received for r in records) == list(range(1_001))


def test_rebalance_of_different_producers_does_not_pile_onto_one_subtask(make_env: Env) -> None:
    env = make_env()
    firsts = {_route(env, "rebalance", 4, 1, index=i).index([0]) for i in range(4)}
    assert len(firsts) == 4, "every producer starts its round robin on the same subtask"


def test_hash_without_skew_is_uniform(make_env: Env) -> None:
    received = _route(make_env(), "hash", 4, 20_000)
    for share in _shares(received):
        assert share == pytest.approx(0.25, abs=0.02)
    assert sorted(r for records in received for r in records) == list(range(20_000))


@pytest.mark.parametrize("skew", [0.3, 0.7])
def test_hash_skew_sends_the_hot_share_to_subtask_zero(make_env: Env, skew: float) -> None:
    received = _route(make_env(), "hash", 4, 20_000, skew=skew)
    shares = _shares(received)
    # the hot key's records plus subtask 0's even part of the others
    assert shares[0] == pytest.approx(skew + (1 - skew) / 4, abs=0.02)
    for share in shares[1:]:
        assert share == pytest.approx((1 - skew) / 4, abs=0.02)


def test_hash_is_repeatable_for_a_seed(make_env: Env) -> None:
    env = make_env()
    first = _route(env, "hash", 3, 3_000, skew=0.5, seed=7)
    again = _route(env, "hash", 3, 3_000, skew=0.5, seed=7)
    other = _route(env, "hash", 3, 3_000, skew=0.5, seed=8)
    assert first == again
    assert first != other


def test_broadcast_copies_every_record_to_every_subtask(make_env: Env) -> None:
    received = _route(make_env(), "broadcast", 3, 1_500)
    assert received == [list(range(1_500))] * 3


# -- operator volumes -------------------------------------------------------------------------


def _volume(spec: OperatorSpec, records_in: int) -> int:
    transform = Transform(spec)
    out, sent, turn = 0, 0, 0
    while sent < records_in:
        size = min(CHUNK_SIZES[turn % len(CHUNK_SIZES)], records_in - sent)
        out += len(transform.apply(list(range(sent, sent + size))))
        sent, turn = sent + size, turn + 1
    return out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(OperatorSpec("m", "map"), 10_000, id="map"),
        pytest.param(OperatorSpec("f", "filter", selectivity=0.5), 5_000, id="filter-0.5"),
        pytest.param(OperatorSpec("f", "filter", selectivity=0.3), 3_000, id="filter-0.3"),
        pytest.param(OperatorSpec("f", "filter", selectivity=0.0), 0, id="filter-0"),
        pytest.param(OperatorSpec("x", "flatmap", fanout=3), 30_000, id="fanout-3"),
        pytest.param(OperatorSpec("x", "flatmap", fanout=2.5), 25_000, id="fanout-2.5"),
        pytest.param(OperatorSpec("x", "flatmap", fanout=0.5), 5_000, id="fanout-0.5"),
        pytest.param(OperatorSpec("s", "sink"), 0, id="sink"),
    ],
)
def test_records_out_per_record_in(spec: OperatorSpec, expected: int) -> None:
    assert abs(_volume(spec, 10_000) - expected) <= 1


def test_fractions_hold_for_single_records() -> None:
    """Fractional fanout is carried from one chunk to the next, not rounded per chunk."""
    transform = Transform(OperatorSpec("x", "flatmap", fanout=1.5))
    counts = [len(transform.apply([i])) for i in range(10)]
    assert sum(counts) == 15
    assert set(counts) == {1, 2}
