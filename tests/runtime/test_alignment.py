"""Barrier alignment at a task's inputs, through real gates, channels and a manual clock.

A gate on task manager 1 reads a remote producer (channel 0, on task manager 0) and a local one
(channel 1). The tests read it as a task's loop does, handing each event to the handler, and
record what the handler forwards and acknowledges in place of the task's outputs and coordinator.
"""

from __future__ import annotations

from collections.abc import Callable

from bpmon.model.clock import ManualClock
from bpmon.runtime.alignment import BarrierHandler, BarrierTiming
from bpmon.runtime.buffers import Buffer
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.partition import ResultPartition
from bpmon.runtime.subpartition import END_OF_PARTITION, ChannelEvent

Env = Callable[..., NetworkEnvironment]


class Task:
    """What the handler reports to: barriers forwarded, snapshots acknowledged."""

    def __init__(self, overtaken: int = 0) -> None:
        self.overtaken = overtaken
        self.forwarded: list[int] = []
        self.acks: list[tuple[int, float, int]] = []
        self.timings: list[BarrierTiming] = []

    def forward(self, barrier: ChannelEvent) -> int:
        self.forwarded.append(barrier.checkpoint_id)
        return self.overtaken

    def acknowledge(self, checkpoint_id: int, timing: BarrierTiming) -> None:
        self.acks.append((checkpoint_id, timing.alignment_s, timing.persisted_bytes))
        self.timings.append(timing)


def setup(
    make_env: Env, aligned: bool, task: Task
) -> tuple[NetworkEnvironment, list[ResultPartition], InputGate, BarrierHandler, ManualClock]:
    env = make_env(task_managers=2, segment_size=256)
    producers = [env.create_partition(tm, 1, f"p{tm}") for tm in (0, 1)]
    gate = env.create_gate(1, [(p, 0) for p in producers], "g")
    clock = ManualClock(10.0)
    handler = BarrierHandler(
        [gate],
        aligned=aligned,
        lock=gate.condition,
        clock=clock.now,
        forward=task.forward,
        acknowledge=task.acknowledge,
    )
    return env, producers, gate, handler, clock


def read(env: NetworkEnvironment, gate: InputGate, handler: BarrierHandler) -> list[object]:
    """Read what the gate offers now, as the task loop does; the records of the buffers read."""
    records: list[object] = []
    while True:
        with env.lock:
            polled = gate.poll_next()
            if polled is not None and isinstance(polled[0], Buffer):
                records.extend(polled[0].records)
                polled[0].recycle()
                continue
        if polled is None:
            return records
        event, channel = polled
        assert not isinstance(event, Buffer)
        if event is END_OF_PARTITION:
            handler.on_channel_finished()
        else:
            handler.on_event(event, 0, channel)


def send(partition: ResultPartition, *records: str) -> None:
    for record in records:
        partition.emit(record, 100, 0)
    partition.flush_all()


def test_aligned_blocks_a_channel_until_every_channel_delivered_the_barrier(
    make_env: Env,
) -> None:
    task = Task()
    env, (remote, local), gate, handler, clock = setup(make_env, True, task)
    send(remote, "r0")
    remote.add_event(handler.barrier(1, 9.0))
    send(remote, "r1")  # after the barrier: held back until the checkpoint is aligned
    send(local, "l0")
    assert sorted(read(env, gate, handler)) == ["l0", "r0"]
    assert task.forwarded == [] and task.acks == []

    clock.advance(0.25)
    local.add_event(handler.barrier(1, 9.0))
    assert read(env, gate, handler) == ["r1"]
    assert task.forwarded == [1]
    assert task.acks == [(1, 0.25, 0)]


def test_a_channel_that_finishes_instead_of_sending_its_barrier_completes_the_alignment(
    make_env: Env,
) -> None:
    task = Task()
    env, (remote, local), gate, handler, clock = setup(make_env, True, task)
    remote.add_event(handler.barrier(3, 9.0))
    read(env, gate, handler)
    clock.advance(0.5)
    local.finish()
    read(env, gate, handler)
    assert task.forwarded == [3]
    assert task.acks == [(3, 0.5, 0)]


def test_unaligned_forwards_the_first_barrier_at_once_and_counts_remote_in_flight_bytes(
    make_env: Env,
) -> None:
    task = Task(overtaken=50)  # output bytes the forwarded barrier overtook
    env, (remote, local), gate, handler, clock = setup(make_env, False, task)
    send(remote, "r0", "r1", "r2")  # one buffer of 300 bytes, now in the remote channel
    send(local, "l0")  # in the producer's own subpartition: counted by the producer
    with env.lock:
        remote_bytes = gate.channels[0].queued_input_bytes()
    assert remote_bytes == 300
    barrier = handler.barrier(7, 9.0)
    assert barrier.priority
    remote.add_event(barrier)
    with env.lock:
        found = handler.priority_barrier()  # at the head, ahead of the buffered data
    assert found == (barrier, 0, 0)
    handler.on_event(*found)
    assert task.forwarded == [7] and task.acks == []
    assert sorted(read(env, gate, handler)) == ["l0", "r0", "r1", "r2"]  # nothing blocked

    clock.advance(0.125)
    local.finish()
    read(env, gate, handler)
    assert task.forwarded == [7]  # forwarded once, at the first barrier
    assert task.acks == [(7, 0.125, 50 + remote_bytes)]
