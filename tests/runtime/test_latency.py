"""``[network] latency_ms``: buffers and credit announcements take that long over a connection.

A remote channel with ``c`` credits carries at most ``c`` buffers per round trip (2 x latency),
as in Flink: a buffer goes against credit, arrives after the latency, and the credit its reading
frees takes the latency again to reach the sender. The expected figures are that arithmetic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpmon.model.clock import ManualClock
from bpmon.model.errors import ConfigError
from bpmon.runtime.connection import ConnectionID
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.subpartition import ChannelEvent
from bpmon.scenario import NetworkConfig, parse_scenario
from tests.runtime.jobs import StartJob, StopJob, read_all
from tests.waiting import wait_until

Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]
SEGMENT = 256
LATENCY_S = 0.002


def _arrived(env: NetworkEnvironment, gate: InputGate, drain: Drain, want: int) -> list[object]:
    """Read the gate until ``want`` more records came (the link timer delivers them)."""
    got: list[object] = []

    def enough() -> bool:
        got.extend(drain(env, gate)[0])
        return len(got) >= want

    wait_until(enough, f"{want} record(s) over the link", poll_s=0.002)
    return got


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for the link timer to make ``condition`` true."""
    wait_until(condition, what, poll_s=0.002)


@pytest.fixture
def one_credit() -> Iterator[tuple[NetworkEnvironment, ManualClock, Callable[[int], None]]]:
    """A channel tm-0 -> tm-1 with exactly one credit (its gate's floating buffer held away)."""
    clock = ManualClock(100.0)
    config = NetworkConfig(
        task_managers=2,
        segment_size=SEGMENT,
        buffers_per_channel=1,
        floating_buffers_per_gate=1,
        latency_ms=LATENCY_S * 1000,
    )
    env = NetworkEnvironment(config, clock=clock.now)
    partition = env.create_partition(0, 1, "src")
    gate = env.create_gate(1, [(partition, 0)], "sink")
    with env.lock:
        floating = gate.pool.request_memory_segment()
    assert floating is not None
    yield env, clock, partition.channel_writer(SEGMENT, 0)
    with env.lock:
        gate.pool.recycle(floating)
    env.shutdown()
    assert env.leaks() == []


def test_one_credit_and_2_ms_carry_one_buffer_per_4_ms(
    one_credit: tuple[NetworkEnvironment, ManualClock, Callable[[int], None]], drain: Drain
) -> None:
    """Buffer k (from 0) arrives at 2 ms + k x 4 ms: one per round trip, none sooner."""
    env, clock, emit = one_credit
    gate = env.gates[0]
    for i in range(5):  # a record fills a buffer: five buffers queue at the sender
        emit(i)
    view = env.connections[ConnectionID(0, 1, 0)].views[0]
    assert view.credit == 0  # the first went at once against the one credit
    queue = view.subpartition
    got: list[object] = []
    for k in range(5):
        clock.advance(LATENCY_S - 1e-4)  # just before buffer k arrives: nothing new yet
        time.sleep(0.01)  # no condition to wait on: a moment in which nothing may arrive
        got += drain(env, gate)[0]
        assert got == list(range(k)), f"buffer {k} arrived before its round trip"
        clock.advance(1e-4)
        got += _arrived(env, gate, drain, 1)  # reading it announces its credit
        assert got == list(range(k + 1))
        assert view.credit == 0  # the credit is on its way back for the latency
        clock.advance(LATENCY_S)  # the credit arrives: the next buffer goes
        if k < 4:
            _until(lambda left=4 - k: queue.backlog < left, f"buffer {k + 1} to be sent")
    _until(lambda: view.credit == 1, "the last credit back at the sender")
    assert view.credit == 1 and queue.peek() is None


def test_credit_announcements_wait_for_the_latency(
    one_credit: tuple[NetworkEnvironment, ManualClock, Callable[[int], None]], drain: Drain
) -> None:
    env, clock, emit = one_credit
    gate = env.gates[0]
    emit(0)
    clock.advance(LATENCY_S)
    assert _arrived(env, gate, drain, 1) == [0]
    view = env.connections[ConnectionID(0, 1, 0)].views[0]
    clock.advance(LATENCY_S / 2)
    time.sleep(0.01)  # no condition to wait on: a moment in which nothing may arrive
    assert view.credit == 0, "the credit reached the sender in half the latency"
    clock.advance(LATENCY_S / 2)
    _until(lambda: view.credit == 1, "the credit back at the sender")
    assert view.credit == 1


@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_latency_must_be_a_number_of_0_or_more(value: float) -> None:
    with pytest.raises(ConfigError, match=r"network\.latency_ms"):
        NetworkConfig(latency_ms=value)


def test_a_scenario_file_rejects_a_negative_latency() -> None:
    with pytest.raises(ValueError, match=r"latency_ms = -2.0: must be 0 or more"):
        parse_scenario(_job(latency_ms=-2, credits=2, rate=10))


# -- jobs: records/s against the round-trip bound -----------------------------------------------

RECORD = 8192
"""Bytes per record: four records fill a 32 KiB buffer."""


def _job(*, latency_ms: float, credits: int, rate: int) -> str:
    """A source on tm-0 and a sink on tm-1: one remote channel, ``credits`` exclusive buffers."""
    return f"""
name = "latency"
[network]
task_managers = 2
latency_ms = {latency_ms}
buffers_per_channel = {credits}
floating_buffers_per_gate = 1
buffer_timeout_ms = 1000
[[operators]]
name = "source"
kind = "source"
rate = {rate}
record_bytes = {RECORD}
slot_sharing_group = "a"
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "source" }}]
slot_sharing_group = "b"
"""


def _delivered(start_job: StartJob, stop_job: StopJob, text: str, seconds: float) -> float:
    """Records/s the sink took in over ``seconds`` after a one-second warm-up."""
    job = start_job(parse_scenario(text))
    time.sleep(1.0)
    (sink,) = job.tasks["sink"]
    before, began = sink.records_in.total, time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - began
    moved = sink.records_in.total - before
    stop_job(job)
    return moved / took


@pytest.mark.slow
def test_few_credits_and_a_latency_cap_a_channel_at_credits_per_round_trip(
    start_job: StartJob, stop_job: StopJob
) -> None:
    """1 exclusive + the gate's 1 floating buffer = 2 credits per 4 ms round trip: at most 500
    buffers/s, 2,000 records/s of 8 KiB, against 5,000 offered."""
    bound = 2 / (2 * 0.002) * (32768 // RECORD)
    rate = _delivered(start_job, stop_job, _job(latency_ms=2, credits=1, rate=5000), 2.0)
    # one round trip of buffers may be on the way at either end of the measurement
    assert 0 < rate <= bound * 1.1, f"{rate:.0f} records/s over a {bound:.0f}/s bound"


@pytest.mark.slow
def test_a_latency_with_enough_credits_does_not_limit(
    start_job: StartJob, stop_job: StopJob
) -> None:
    """8 exclusive + 1 floating credits per 4 ms: 9,000 records/s of 8 KiB, 7.5x the 1,200
    offered; the sink keeps up with the source."""
    rate = _delivered(start_job, stop_job, _job(latency_ms=2, credits=8, rate=1200), 2.0)
    assert rate >= 1200 * 0.8, f"{rate:.0f} records/s of the 1,200 offered"


# -- property: credit is conserved on the way, and every record arrives once, in order ---------


def _in_flight(env: NetworkEnvironment) -> tuple[int, int]:
    """(credits, buffers) on their way over the one connection (read under the lock)."""
    flight = env.connections[ConnectionID(0, 1, 0)]._in_flight
    credits = sum(a.item for a in flight if isinstance(a.item, int))
    buffers = sum(1 for a in flight if not isinstance(a.item, (int, ChannelEvent)))
    return credits, buffers


@settings(max_examples=25, deadline=None)
@given(
    exclusive=st.integers(1, 3),
    floating=st.integers(1, 3),
    latency_ms=st.sampled_from([1.0, 2.0, 5.0]),
    buffers=st.integers(1, 10),
    reads=st.lists(st.booleans(), min_size=1, max_size=30),
)
def test_credit_on_its_way_is_conserved_and_every_record_arrives_in_order(
    exclusive: int, floating: int, latency_ms: float, buffers: int, reads: list[bool]
) -> None:
    """At every step the receiver's free buffers equal the sender's credit plus the credit and
    the buffers on their way; whatever the reader does, each record arrives once, in order."""
    clock = ManualClock(100.0)
    config = NetworkConfig(
        task_managers=2,
        segment_size=SEGMENT,
        buffers_per_channel=exclusive,
        floating_buffers_per_gate=floating,
        latency_ms=latency_ms,
    )
    env = NetworkEnvironment(config, clock=clock.now)
    try:
        partition = env.create_partition(0, 1, "src")
        gate = env.create_gate(1, [(partition, 0)], "sink")
        emit = partition.channel_writer(SEGMENT, 0)
        view = env.connections[ConnectionID(0, 1, 0)].views[0]
        sent = 0
        got: list[object] = []
        for read in [*reads, *[True] * (4 * buffers)]:  # then read until everything came
            if sent < buffers and partition.subpartitions[0].backlog < 2:  # never blocks
                emit(sent)
                sent += 1
            clock.advance(latency_ms / 1000)
            time.sleep(0.003)  # the link timer delivers what is due
            with env.lock:
                credits, flying = _in_flight(env)
                channel = view.channel
                assert channel.available_buffers == (
                    view.credit + credits + flying + channel.unannounced_credit
                )
                assert view.credit >= 0
            if read:
                got += read_all(env, gate)[0]

        def all_came() -> bool:
            clock.advance(latency_ms / 1000)
            got.extend(read_all(env, gate)[0])
            return len(got) >= sent

        wait_until(all_came, "every record sent to arrive", poll_s=0.003)
        assert sent == buffers
        assert got == list(range(buffers))
    finally:
        env.shutdown()
    assert env.leaks() == []
