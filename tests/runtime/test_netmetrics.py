"""Network metrics with Flink's definitions: outPoolUsage, inPoolUsage and their parts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputGate
from bpmon.runtime.netmetrics import input_metrics, output_metrics
from bpmon.runtime.network import NetworkEnvironment

Env = Callable[..., NetworkEnvironment]
Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]


def test_idle_network_reads_zero(make_env: Env) -> None:
    env = make_env(task_managers=2)
    partition = env.create_partition(0, 2, "p")
    gates = [env.create_gate(1, [(partition, i)], f"g{i}") for i in range(2)]
    out = output_metrics([partition])
    assert out.out_pool_usage == 0.0 and out.output_queue_length == 0
    inputs = input_metrics(gates)
    assert inputs.in_pool_usage == 0.0 and inputs.input_queue_length == 0


def test_a_stopped_consumer_fills_both_sides(make_env: Env, drain: Drain) -> None:
    env = make_env(task_managers=2, segment_size=256, max_overdraft_buffers_per_gate=0)
    partition = env.create_partition(0, 1, "p")  # pool max 1*2 + 8 = 10
    gate = env.create_gate(1, [(partition, 0)], "g")  # 2 exclusive + 8 floating
    emit = partition.channel_writer(256, 0)
    pool = partition.pool
    # The receiver takes 10 buffers (2 exclusive + 8 floating); the sender keeps the rest.
    for i in range(10 + pool.pool_size):
        emit(i)
    inputs = input_metrics([gate])
    assert inputs.in_pool_usage == pytest.approx(1.0)
    assert inputs.exclusive_usage == pytest.approx(1.0)
    assert inputs.floating_usage == pytest.approx(1.0)
    assert inputs.input_queue_length == 10
    out = output_metrics([partition])
    assert out.out_pool_usage == pytest.approx(1.0)
    assert out.output_queue_length == pool.pool_size
    # the channel as the real reading (runtime.channelmetrics, tested on jobs) sees it
    (channel,) = gate.channels
    assert isinstance(channel, RemoteInputChannel) and channel.sender is not None
    assert channel.available_buffers == 0 and channel.sender.credit == 0
    assert channel.sender.subpartition.backlog == pool.pool_size
    drain(env, gate)
    assert input_metrics([gate]).in_pool_usage < 0.5


def test_out_pool_usage_goes_above_one_while_overdraft_is_out(make_env: Env) -> None:
    env = make_env(
        task_managers=1, segment_size=256, max_overdraft_buffers_per_gate=5, total_buffers=64
    )
    partition = env.create_partition(0, 1, "p")
    env.create_gate(0, [(partition, 0)], "g")
    size = partition.pool.pool_size
    for i in range(size):
        partition.emit(i, 256, 0)
    partition.emit("spans three", 256 * 3, 0)
    out = output_metrics([partition])
    assert out.overdraft_buffers == 3
    assert out.out_pool_usage == pytest.approx((size + 3) / size)
