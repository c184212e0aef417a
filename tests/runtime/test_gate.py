"""Input gates: round-robin fairness, local channels recycling into the producer's pool."""

from __future__ import annotations

from collections.abc import Callable

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment

Env = Callable[..., NetworkEnvironment]
Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]


def test_channels_are_served_round_robin(make_env: Env) -> None:
    env = make_env(task_managers=2, segment_size=256)
    producers = [env.create_partition(tm, 1, f"p{tm}") for tm in (0, 1, 1)]
    gate = env.create_gate(1, [(p, 0) for p in producers], "g")
    for n, producer in enumerate(producers):
        emit = producer.channel_writer(256, 0)
        for i in range(3):
            emit((n, i))
    order = []
    with env.lock:
        while (polled := gate.poll_next()) is not None:
            item, channel = polled
            assert isinstance(item, Buffer)
            order.append(channel)
            item.recycle()
    # the remote channel (0) and both local ones (1, 2) take turns, one buffer each
    assert order == [0, 1, 2, 0, 1, 2, 0, 1, 2]


def test_local_channel_hands_the_producers_buffer_and_recycles_it_there(make_env: Env) -> None:
    # a finished buffer (under "publish" a slice is read instead: tests/runtime/test_flush.py)
    env = make_env(task_managers=1, output_flush="finish")
    producer = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(producer, 0)], "g")
    producer.writer(100)("r", 0)
    producer.flush_all()
    used_before = producer.pool.used
    with env.lock:
        polled = gate.poll_next()
        assert polled is not None and isinstance(polled[0], Buffer)
        assert polled[0].recycler is producer.pool  # no copy: the producer's own segment
        assert producer.pool.used == used_before
        polled[0].recycle()
        assert producer.pool.used == used_before - 1


def test_gate_finishes_after_end_of_partition_on_every_channel(make_env: Env) -> None:
    env = make_env(task_managers=2)
    producers = [env.create_partition(tm, 1, f"p{tm}") for tm in (0, 1)]
    gate = env.create_gate(1, [(p, 0) for p in producers], "g")
    producers[0].finish()
    with env.lock:
        while gate.poll_next() is not None:
            pass
    assert not gate.is_finished
    producers[1].finish()
    with env.lock:
        while gate.poll_next() is not None:
            pass
    assert gate.is_finished
