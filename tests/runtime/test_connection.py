"""Connections: credit-based flow control against legacy TCP (FLINK-7282), and the bandwidth cap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from bpmon.model.clock import ManualClock
from bpmon.model.errors import WaitCancelledError
from bpmon.runtime.buffers import Buffer
from bpmon.runtime.connection import Connection, ConnectionID
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.partition import ResultPartition
from bpmon.scenario import NetworkConfig
from tests.waiting import wait_until

Env = Callable[..., NetworkEnvironment]
Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]


def _produce(partition: ResultPartition, stop: threading.Event) -> None:
    emit = partition.channel_writer(100, 0)
    try:
        i = 0
        while not stop.is_set():
            emit(i)
            i += 1
    except WaitCancelledError:
        pass  # the environment shut down while the producer waited for a buffer


def _until_full(
    env: NetworkEnvironment,
    connection: Connection,
    stopped: ResultPartition,
    shared_with: InputGate | None,
) -> None:
    """Until the receiver that never reads has all the buffers it will take.

    Under ``credit`` its sender view is out of credit with data waiting; under ``tcp`` its
    connection stalled and, where another gate shares it, what reached that gate before was read.
    """

    def full() -> bool:
        with env.lock:
            if connection.credit_based:
                return any(
                    v.subpartition is stopped.subpartitions[0]
                    and v.credit == 0
                    and v.subpartition.backlog > 0
                    for v in connection.views
                )
            return connection.stalled and (shared_with is None or shared_with.queue_length() == 0)

    wait_until(full, "the stopped receiver's buffers to fill")


def _consume(
    env: NetworkEnvironment, gate: InputGate, stop: threading.Event, got: list[int]
) -> None:
    with env.lock:
        while not stop.is_set():
            polled = gate.poll_next()
            if polled is None:
                gate.condition.wait(0.05)
                continue
            item = polled[0]
            if isinstance(item, Buffer):
                got[0] += len(item.records)
                item.recycle()


@pytest.mark.parametrize("flow_control", ["credit", "tcp"])
def test_flink_7282_one_stopped_receiver_and_a_shared_connection(
    make_env: Env, flow_control: str
) -> None:
    """Two channels share the connection tm-0 -> tm-1; the receiver of one stops consuming.

    Under ``tcp`` its full gate stops the whole connection and the other channel stalls too;
    under ``credit`` only the stopped channel runs out of credit and the other keeps flowing.
    (Both gates use connection index 0: two consumer subtasks of one intermediate result.)
    """
    env = make_env(task_managers=2, flow_control=flow_control, buffer_timeout_ms=0)
    stopped_src = env.create_partition(0, 1, "stopped-source")
    busy_src = env.create_partition(0, 1, "busy-source")
    env.create_gate(1, [(stopped_src, 0)], "stopped-sink")  # never read
    busy_gate = env.create_gate(1, [(busy_src, 0)], "busy-sink")
    assert len(env.connections) == 1

    stop, got = threading.Event(), [0]
    threads = [
        threading.Thread(target=_produce, args=(stopped_src, stop), daemon=True),
        threading.Thread(target=_produce, args=(busy_src, stop), daemon=True),
        threading.Thread(target=_consume, args=(env, busy_gate, stop, got), daemon=True),
    ]
    for thread in threads:
        thread.start()
    _until_full(env, env.connections[ConnectionID(0, 1, 0)], stopped_src, busy_gate)
    before = got[0]
    time.sleep(0.5)  # the window measured
    during = got[0] - before
    stalled = env.connections[ConnectionID(0, 1, 0)].stalled
    stop.set()
    env.shutdown()
    for thread in threads:
        thread.join(timeout=2.0)
        assert not thread.is_alive()

    if flow_control == "tcp":
        assert stalled
        assert during == 0, f"the busy channel still moved {during} records over a stalled link"
    else:
        assert during > 20_000, f"the busy channel moved only {during} records in 0.5 s"


def test_under_tcp_a_stopped_receiver_of_one_result_does_not_stall_another_result(
    make_env: Env,
) -> None:
    """Flink before 1.5: each intermediate result has its own connection to a task manager
    (its ``connectionIndex``), so a full gate of one result stops only that result's connection."""
    env = make_env(task_managers=2, flow_control="tcp", buffer_timeout_ms=0)
    stopped_src = env.create_partition(0, 1, "stopped-source")
    busy_src = env.create_partition(0, 1, "busy-source")
    env.create_gate(1, [(stopped_src, 0)], "stopped-sink", connection_index=11)  # never read
    busy_gate = env.create_gate(1, [(busy_src, 0)], "busy-sink", connection_index=22)
    assert sorted(env.connections) == [(0, 1, 11), (0, 1, 22)]

    stop, got = threading.Event(), [0]
    threads = [
        threading.Thread(target=_produce, args=(stopped_src, stop), daemon=True),
        threading.Thread(target=_produce, args=(busy_src, stop), daemon=True),
        threading.Thread(target=_consume, args=(env, busy_gate, stop, got), daemon=True),
    ]
    for thread in threads:
        thread.start()
    _until_full(env, env.connections[ConnectionID(0, 1, 11)], stopped_src, None)
    before = got[0]
    time.sleep(0.5)  # the window measured
    during = got[0] - before
    stalled = env.connections[ConnectionID(0, 1, 11)].stalled
    stop.set()
    env.shutdown()
    for thread in threads:
        thread.join(timeout=2.0)
        assert not thread.is_alive()

    assert stalled
    assert during > 20_000, f"the other result's channel moved only {during} records in 0.5 s"


def test_stalled_tcp_connection_resumes_when_the_head_gets_a_buffer(
    make_env: Env, drain: Drain
) -> None:
    env = make_env(task_managers=2, flow_control="tcp", segment_size=256, total_buffers=200)
    slow_src = env.create_partition(0, 1, "slow-source")
    other_src = env.create_partition(0, 1, "other-source")
    slow_gate = env.create_gate(1, [(slow_src, 0)], "slow-sink")
    other_gate = env.create_gate(1, [(other_src, 0)], "other-sink")
    slow_emit = slow_src.channel_writer(256, 0)
    for i in range(slow_gate.pool.max_size + 2):  # more buffers than the slow gate can hold
        slow_emit(i)
    other_src.channel_writer(256, 0)("behind the head")
    connection = env.connections[ConnectionID(0, 1, 0)]
    assert connection.stalled
    assert drain(env, other_gate) == ([], [])  # stuck behind the stalled head
    records, _ = drain(env, slow_gate)  # frees buffers: the head goes in, the link moves again
    records += drain(env, slow_gate)[0]
    assert records == list(range(slow_gate.pool.max_size + 2))
    assert not connection.stalled
    assert drain(env, other_gate)[0] == ["behind the head"]


def test_credit_sender_holds_exactly_the_receivers_free_buffers(
    make_env: Env, drain: Drain
) -> None:
    env = make_env(task_managers=2, segment_size=256, buffers_per_channel=2)
    partition = env.create_partition(0, 1, "src")
    gate = env.create_gate(1, [(partition, 0)], "sink")
    emit = partition.channel_writer(256, 0)
    view = env.connections[ConnectionID(0, 1, 0)].views[0]
    channel = view.channel
    assert view.credit == 2 == channel.available_buffers
    for i in range(6):
        emit(i)
    # every buffer went: each announced backlog brought floating buffers, and credit with them
    assert gate.queue_length() == 6
    assert view.credit == channel.available_buffers == 2
    records, _ = drain(env, gate)
    assert records == list(range(6))
    assert view.credit == channel.available_buffers >= 2


def test_bandwidth_cap_limits_throughput(make_env: Env) -> None:
    env = make_env(task_managers=2, link_bandwidth_mb_s=2.0, buffer_timeout_ms=0)
    partition = env.create_partition(0, 1, "src")
    gate = env.create_gate(1, [(partition, 0)], "sink")
    stop, got = threading.Event(), [0]
    threads = [
        threading.Thread(target=_produce, args=(partition, stop), daemon=True),
        threading.Thread(target=_consume, args=(env, gate, stop, got), daemon=True),
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: got[0], "the first records over the link")
    began = time.monotonic()
    start = got[0]
    time.sleep(1.0)  # the window measured
    moved_bytes = (got[0] - start) * 100
    took = time.monotonic() - began
    stop.set()
    env.shutdown()
    for thread in threads:
        thread.join(timeout=2.0)
    # What the consumer took in crossed the link while it was read, or was already held on the
    # receiving side (exclusive and floating buffers) or on the wire: however late the threads
    # ran, never more than the cap allows. (How close to the cap it gets: bench_fidelity.py.)
    config = NetworkConfig()
    held = (config.buffers_per_channel + config.floating_buffers_per_gate + 2) * 32768
    assert 0 < moved_bytes <= 2e6 * took + held, f"{moved_bytes / took / 1e6:.2f} MB/s, cap 2"


def test_connections_between_the_same_task_managers_share_their_link_and_its_cap(
    drain: Drain,
) -> None:
    """Under ``tcp`` two exchanges from tm-0 to tm-1 use two connections, but one link: a buffer
    on one occupies the link, and the other connection's buffer waits for it."""
    clock = ManualClock(100.0)
    config = NetworkConfig(
        task_managers=2, flow_control="tcp", segment_size=256, link_bandwidth_mb_s=0.001
    )
    env = NetworkEnvironment(config, clock=clock.now)
    try:
        first, second = env.create_partition(0, 1, "first"), env.create_partition(0, 1, "second")
        first_gate = env.create_gate(1, [(first, 0)], "first-sink", connection_index=1)
        second_gate = env.create_gate(1, [(second, 0)], "second-sink", connection_index=2)
        assert len(env.connections) == 2
        first.channel_writer(256, 0)("one")  # fills a buffer: it is sent at once
        second.channel_writer(256, 0)("two")
        assert drain(env, first_gate)[0] == ["one"]
        assert drain(env, second_gate) == ([], [])  # its connection is idle, the link is not
        clock.advance(256 / 1000)  # the link is free again: the link timer sends it
        got = wait_until(lambda: drain(env, second_gate)[0], "the second connection's buffer")
        assert got == ["two"]
    finally:
        env.shutdown()
    assert env.leaks() == []
