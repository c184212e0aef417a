"""Property-based proof that the network stack conserves its resources (DESIGN.md, STYLE.md §9).

Hypothesis state machines drive the real objects of ``bpmon.runtime`` from one thread, under the
network lock, and check after every step what the design promises: no segment lost or duplicated,
credit never negative and equal to the receiver's free buffers, no buffer sent without credit,
overdraft within its limit, every record delivered exactly once and in order with exact byte
counts, and nothing leaked once the environment is shut down (also in the middle of a run).

The expected values come from Flink's semantics (``reference/flink-network.md`` §1-2) and from the
test's own record of what it did, never from the code under test. A few checks read private
fields (segment ids in free lists) because "no segment duplicated" is about identities, which the
public API only exposes as counts.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.network_pool import NetworkBufferPool
from bpmon.runtime.partition import ResultPartition, _SharedSegment
from bpmon.runtime.subpartition import END_OF_PARTITION, ChannelEvent, PipelinedSubpartition
from bpmon.scenario import FlowControl, NetworkConfig

SETTINGS = settings(max_examples=100, stateful_step_count=50, deadline=None)


class _NeverWait(threading.Condition):
    """A pool condition that fails the step instead of blocking: no step may wait."""

    def wait(self, timeout: float | None = None) -> bool:
        raise AssertionError("a step would have blocked waiting for a buffer")


# -- 2 and 3. the whole network stack -----------------------------------------------------------


@dataclass
class Stream:
    """What one subpartition was sent, and what its consumer has received so far."""

    records: list[object] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # cumulative byte offset of each record's end
    received_bytes: int = 0
    received_records: int = 0
    barriers: dict[int, tuple[int, bool]] = field(default_factory=dict)  # id -> (bytes, priority)
    ended: bool = False

    @property
    def emitted_bytes(self) -> int:
        """Bytes written to the subpartition."""
        return self.ends[-1] if self.ends else 0

    def receive(self, buffer: Buffer, segment_size: int) -> None:
        """Check a buffer against the serialization: it carries the records ending in it."""
        assert not self.ended, "a buffer arrived after end-of-partition"
        assert 0 < buffer.size <= segment_size
        start, self.received_bytes = self.received_records, self.received_bytes + buffer.size
        assert self.received_bytes <= self.emitted_bytes, "more bytes arrived than were sent"
        self.received_records = bisect_right(self.ends, self.received_bytes)
        assert buffer.records == self.records[start : self.received_records]

    def event(self, event: ChannelEvent) -> None:
        """Check an event's position in the stream."""
        assert not self.ended, "an event arrived after end-of-partition"
        if event is END_OF_PARTITION:
            assert self.received_bytes == self.emitted_bytes and not self.barriers
            self.ended = True
            return
        sent_after, priority = self.barriers.pop(event.checkpoint_id)
        if priority:  # an unaligned barrier overtakes buffers, never the other way round
            assert self.received_bytes <= sent_after
        else:
            assert self.received_bytes == sent_after


class NetworkMachine(RuleBasedStateMachine):
    """Two task managers, 1-3 producer partitions, one consumer gate per subpartition index."""

    flow_control: FlowControl = "credit"

    def __init__(self) -> None:
        super().__init__()
        self.env: NetworkEnvironment | None = None
        self.partitions: list[ResultPartition] = []
        self.gates: list[InputGate] = []
        self.gate_tm: list[int] = []
        self.source: dict[tuple[int, int], tuple[int, int]] = {}  # (gate, channel) -> stream
        self.streams: dict[tuple[int, int], Stream] = {}  # (partition, subpartition)
        self.held: list[tuple[int, int, Buffer]] = []  # (gate, channel, buffer)
        self.finished: set[int] = set()
        self.blocked: set[tuple[int, int]] = set()  # (gate, channel)
        self.shut = False
        self.checkpoint = 0

    @property
    def segment_size(self) -> int:
        """Bytes per segment of this run."""
        assert self.env is not None
        return self.env.config.segment_size

    @initialize(data=st.data())
    def build(self, data: st.DataObject) -> None:
        layout = data.draw(
            st.lists(st.tuples(st.integers(0, 1), st.integers(1, 3)), min_size=1, max_size=3)
        )
        consumers = max(subs for _, subs in layout)
        self.gate_tm = data.draw(
            st.lists(st.integers(0, 1), min_size=consumers, max_size=consumers)
        )
        config = NetworkConfig(
            segment_size=data.draw(st.sampled_from([256, 512, 1024])),
            buffers_per_channel=data.draw(st.integers(1, 3)),
            floating_buffers_per_gate=data.draw(st.integers(1, 4)),
            max_buffers_per_channel=data.draw(st.integers(1, 5)),
            max_overdraft_buffers_per_gate=data.draw(st.integers(0, 3)),
            flow_control=self.flow_control,
            output_flush=data.draw(st.sampled_from(["finish", "publish"])),
            task_managers=2,
        )
        if data.draw(st.booleans(), label="scarce"):  # a fixed, tight total instead of "enough"
            total = self._minimum_total(config, layout) + data.draw(st.integers(0, 6))
            config = replace(config, total_buffers=total)
        self.env = self._wire_up(NetworkEnvironment(config), layout)

    def _wire_up(
        self, env: NetworkEnvironment, layout: list[tuple[int, int]]
    ) -> NetworkEnvironment:
        """Create the partitions and the gates, every pool on a condition that must not wait."""
        self.partitions, self.gates, self.streams, self.source = [], [], {}, {}
        for p, (tm, subs) in enumerate(layout):
            cond = _NeverWait(env.lock)
            self.partitions.append(env.create_partition(tm, subs, f"producer-{p}", cond))
            self.streams.update({(p, s): Stream() for s in range(subs)})
        for j, tm in enumerate(self.gate_tm):
            inputs = [(p, j) for p, (_, subs) in enumerate(layout) if subs > j]
            wired = [(self.partitions[p], s) for p, s in inputs]
            self.gates.append(env.create_gate(tm, wired, f"consumer-{j}", _NeverWait(env.lock)))
            self.source.update({(j, index): stream for index, stream in enumerate(inputs)})
        return env

    def _minimum_total(self, config: NetworkConfig, layout: list[tuple[int, int]]) -> int:
        """The segments the busier task manager requires (pool minimums + exclusive buffers)."""
        probe = self._wire_up(NetworkEnvironment(config), layout)
        with probe.lock:
            need = [
                sum(pool.min_size for pool in network.pools)
                + sum(ch.initial_credit for ch in self._remote_channels(tm))
                for tm, network in enumerate(probe.pools)
            ]
        probe.shutdown()
        assert probe.leaks() == []
        return max(need)

    # -- producers ------------------------------------------------------------------------------

    def _room(self, p: int, target: int) -> int:
        """Bytes a write to ``target`` can take now without waiting for a buffer."""
        assert self.env is not None
        partition, pool = self.partitions[p], self.partitions[p].pool
        with self.env.lock:
            written = partition.builder_bytes(target)
            free = self.env.pools[self.env.tm_of(partition)].available_segments
            available, requested, size = pool.num_available, pool.requested, pool.pool_size
        if available == 0 and requested < size:  # waiting for the global pool
            return 0
        eager = min(max(0, size - requested), free)  # each emptied pool fetches one more
        overdraft = 0
        if requested + eager >= size:
            overdraft = min(pool.max_overdraft - max(0, requested + eager - size), free - eager)
        segments = available + eager + max(0, overdraft)
        return (self.segment_size - written if written else 0) + segments * self.segment_size

    def _open_partitions(self) -> list[int]:
        return [p for p in range(len(self.partitions)) if p not in self.finished]

    @precondition(lambda self: not self.shut)
    @rule(data=st.data(), writes=st.integers(1, 8))
    def emit(self, data: st.DataObject, writes: int) -> None:
        """Write records of 1 byte to 3 segments, as much as fits without waiting."""
        if not (open_partitions := self._open_partitions()):
            return
        p = data.draw(st.sampled_from(open_partitions))
        for _ in range(writes):
            how = data.draw(st.sampled_from(["emit", "writer", "write_all"]))
            partition = self.partitions[p]
            target = data.draw(st.integers(0, partition.num_subpartitions - 1))
            count = data.draw(st.integers(1, 5)) if how == "write_all" else 1
            nbytes = data.draw(st.integers(1, 3 * self.segment_size))
            nbytes = min(nbytes, self._room(p, target) // count)
            if nbytes == 0:
                continue
            stream = self.streams[p, target]
            records = [(p, target, len(stream.records) + i) for i in range(count)]
            if how == "emit":
                partition.emit(records[0], nbytes, target)
            elif how == "writer":
                partition.writer(nbytes)(records[0], target)
            else:
                partition.write_all(records, nbytes, target)
            for record in records:
                stream.records.append(record)
                stream.ends.append(stream.emitted_bytes + nbytes)

    @precondition(lambda self: not self.shut)
    @rule(data=st.data())
    def flush(self, data: st.DataObject) -> None:
        """The output flusher runs for one partition."""
        self.partitions[data.draw(st.integers(0, len(self.partitions) - 1))].flush_all()

    @precondition(lambda self: not self.shut)
    @rule(data=st.data(), priority=st.booleans())
    def barrier(self, data: st.DataObject, priority: bool) -> None:
        """A checkpoint barrier, aligned (in order) or unaligned (overtaking the queued data)."""
        if not (open_partitions := self._open_partitions()):
            return
        p = data.draw(st.sampled_from(open_partitions))
        self.checkpoint += 1
        self.partitions[p].add_event(ChannelEvent("barrier", self.checkpoint, priority))
        for s in range(self.partitions[p].num_subpartitions):
            stream = self.streams[p, s]
            stream.barriers[self.checkpoint] = (stream.emitted_bytes, priority)

    @precondition(lambda self: not self.shut)
    @rule(data=st.data(), now=st.integers(0, 3))
    def finish(self, data: st.DataObject, now: int) -> None:
        """End a partition (in one step out of four, so that most runs keep writing)."""
        if not now and (open_partitions := self._open_partitions()):
            p = data.draw(st.sampled_from(open_partitions))
            self.partitions[p].finish()
            self.finished.add(p)

    # -- consumers ------------------------------------------------------------------------------

    def _poll(self, j: int, keep: bool) -> bool:
        """Poll gate ``j`` once (lock held), checking what arrives; False if it had nothing."""
        polled = self.gates[j].poll_next()
        if polled is None:
            return False
        item, index = polled
        assert (j, index) not in self.blocked, "a blocked channel was read"
        stream = self.streams[self.source[j, index]]
        if isinstance(item, Buffer):
            stream.receive(item, self.segment_size)
            if keep:
                self.held.append((j, index, item))
            else:
                item.recycle()
        else:
            stream.event(item)
        return True

    @rule(data=st.data(), count=st.integers(1, 4), keep=st.integers(0, 2))
    def poll(self, data: st.DataObject, count: int, keep: int) -> None:
        """Read up to ``count`` items, keeping the buffers one time in three; after shutdown the
        closed gates must return nothing."""
        assert self.env is not None
        j = data.draw(st.integers(0, len(self.gates) - 1))
        with self.env.lock:
            polled = [self._poll(j, keep == 0) for _ in range(count)]
        assert not (self.shut and any(polled)), "a closed gate returned data"

    @precondition(lambda self: not self.shut)
    @rule(data=st.data())
    def block_or_unblock(self, data: st.DataObject) -> None:
        """Block one channel, as an aligned checkpoint does, or read all of a gate again."""
        assert self.env is not None
        j = data.draw(st.integers(0, len(self.gates) - 1))
        if data.draw(st.booleans()):
            index = data.draw(st.integers(0, len(self.gates[j].channels) - 1))
            with self.env.lock:
                self.gates[j].block(index)
            self.blocked.add((j, index))
        else:
            with self.env.lock:
                self.gates[j].unblock_all()
            self.blocked = {(g, i) for g, i in self.blocked if g != j}

    @precondition(lambda self: not self.shut)
    @rule(data=st.data())
    def take_priority_event(self, data: st.DataObject) -> None:
        """What a backpressured task still does: take an unaligned barrier at a channel's head."""
        assert self.env is not None
        j = data.draw(st.integers(0, len(self.gates) - 1))
        with self.env.lock:
            taken = self.gates[j].priority_event()
        if taken is not None:
            event, index = taken
            assert event.priority
            self.streams[self.source[j, index]].event(event)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), count=st.integers(1, 3))
    def recycle(self, data: st.DataObject, count: int) -> None:
        """The consumer is done with some of the buffers it kept (also after shutdown)."""
        assert self.env is not None
        for _ in range(min(count, len(self.held))):
            *_, buffer = self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))
            with self.env.lock:
                buffer.recycle()

    @precondition(lambda self: not self.shut)
    @rule(now=st.integers(0, 4))
    def shutdown(self, now: int) -> None:
        """Shut down mid-flight (in one step out of five): only the consumer's buffers are out."""
        assert self.env is not None
        if now:
            return
        self.env.shutdown()
        self.shut = True
        with self.env.lock:
            for tm, pool in enumerate(self.env.pools):
                held = sum(1 for j, _, _ in self.held if self.gate_tm[j] == tm)
                assert pool.total_segments - pool.available_segments == held
        assert len(self.env.leaks()) == len({self.gate_tm[j] for j, _, _ in self.held})

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def flow_control_holds(self) -> None:
        """Credit: never negative, equal to the receiver's free buffers, and used at once.
        tcp: data waits in a subpartition only while its connection is stalled."""
        if self.env is None or self.shut:
            return
        for connection in self.env.connections.values():
            for view in connection.views:
                assert view.credit >= 0
                if self.flow_control == "credit":
                    assert view.credit == view.channel.available_buffers
                    assert view.channel.unannounced_credit == 0
                    assert not view.sendable(True), "a buffer waits although it has credit"
                elif not connection.stalled:
                    assert view.subpartition.peek() is None, "data waits on a running link"

    @invariant()
    def output_pools_respect_overdraft_and_quota(self) -> None:
        """Overdraft within its limit; an overdrawn pool or a full subpartition is unavailable."""
        if self.env is None or self.shut:
            return
        for partition in self.partitions:
            pool = partition.pool
            assert pool.overdraft_in_use <= pool.max_overdraft
            quota = any(
                pool.subpartition_count(s) >= pool.max_buffers_per_channel
                for s in range(partition.num_subpartitions)
            )
            if pool.overdraft_in_use or quota:
                assert not pool.is_available

    @invariant()
    def every_pool_accounts_for_its_segments(self) -> None:
        """Per task manager and per pool, every segment is somewhere the test can name."""
        if self.env is None or self.shut:
            return
        with self.env.lock:
            for tm, network in enumerate(self.env.pools):
                exclusive = sum(ch.initial_credit for ch in self._remote_channels(tm))
                requested = sum(pool.requested for pool in network.pools)
                assert network.total_segments == network.available_segments + requested + exclusive
            for p, partition in enumerate(self.partitions):
                assert partition.pool.requested == self._partition_segments(p)
            for j, gate in enumerate(self.gates):
                assert gate.pool.requested == self._gate_segments(j)

    def _remote_channels(self, tm: int) -> list[RemoteInputChannel]:
        return [
            ch
            for j, gate in enumerate(self.gates)
            if self.gate_tm[j] == tm
            for ch in gate.channels
            if isinstance(ch, RemoteInputChannel)
        ]

    def _partition_segments(self, p: int) -> int:
        """Where a partition's segments are: pool, builders, queues, the consumer's hands.

        When flushes publish slices, several slices (queued, or held by a local reader) and the
        open builder share one segment: the segments are then the distinct ones among them.
        """
        partition = self.partitions[p]
        if not partition.slices:
            builders = sum(
                1 for s in range(partition.num_subpartitions) if partition.builder_bytes(s)
            )
            queued = sum(sub.backlog for sub in partition.subpartitions)
            held = sum(1 for *_, b in self.held if b.recycler is partition.pool)
            return partition.pool.num_available + builders + queued + held
        segments = {b.segment for b in partition._builders if b.segment is not None}
        for sub in partition.subpartitions:
            assert isinstance(sub, PipelinedSubpartition)
            segments.update(item.segment for item in sub._queue if isinstance(item, Buffer))
        segments.update(b.segment for *_, b in self.held if self._from(b, partition))
        return partition.pool.num_available + len(segments)

    @staticmethod
    def _from(buffer: Buffer, partition: ResultPartition) -> bool:
        """Whether ``buffer`` (held by a local reader) is one of ``partition``'s, or a slice."""
        recycler = buffer.recycler
        return recycler is partition.pool or (
            isinstance(recycler, _SharedSegment) and recycler.pool is partition.pool
        )

    def _gate_segments(self, j: int) -> int:
        """Where a gate pool's segments are: pool, free floating, received floating buffers."""
        gate, total = self.gates[j], self.gates[j].pool.num_available
        for index, ch in enumerate(gate.channels):
            if isinstance(ch, RemoteInputChannel):
                held = sum(1 for g, i, _ in self.held if (g, i) == (j, index))
                total += ch.available_floating + ch.queue_length() + held - ch.exclusive_used
        return total

    @invariant()
    def bytes_are_conserved_per_subpartition(self) -> None:
        """Bytes written = being built + queued at the producer + queued at the receiver + read."""
        if self.env is None or self.shut:
            return
        with self.env.lock:
            for (j, index), (p, s) in self.source.items():
                stream, channel = self.streams[p, s], self.gates[j].channels[index]
                sub = self.partitions[p].subpartitions[s]
                where = self.partitions[p].unpublished_bytes(s) + sub.queued_bytes
                where += stream.received_bytes
                if isinstance(channel, RemoteInputChannel):
                    where += channel.queued_bytes
                if self.flow_control == "credit" or not isinstance(channel, RemoteInputChannel):
                    assert where == stream.emitted_bytes
                else:  # tcp: the rest is on the wire
                    assert where <= stream.emitted_bytes

    @invariant()
    def no_pool_starves_while_segments_are_free(self) -> None:
        """Eager refill, of output pools and of gate pools whose segments go to waiting channels."""
        if self.env is None or self.shut:
            return
        with self.env.lock:
            pools = [p.pool for p in self.partitions] + [g.pool for g in self.env.gates]
            for pool in pools:
                if pool.num_available == 0 and pool.requested < pool.pool_size:
                    free = sum(n.available_segments for n in self.env.pools if pool in n.pools)
                    assert free == 0, f"{pool.owner} did not refill"

    # -- the end --------------------------------------------------------------------------------

    def _drain(self) -> None:
        """Give everything back, flush and finish, and read until nothing moves."""
        assert self.env is not None
        for p in self._open_partitions():
            self.partitions[p].finish()
            self.finished.add(p)
        with self.env.lock:
            for gate in self.gates:
                gate.unblock_all()
        self.blocked.clear()
        for _ in range(10_000):
            with self.env.lock:
                for *_, buffer in self.held:
                    buffer.recycle()
                self.held.clear()
                moved = [self._poll(j, keep=False) for j in range(len(self.gates))]
            if not any(moved):
                return
        raise AssertionError("draining did not finish")

    def teardown(self) -> None:
        if self.env is None:
            return
        if not self.shut:
            self._drain()
            for key, stream in self.streams.items():
                assert stream.ended, f"stream {key}: end-of-partition never arrived"
                assert stream.received_records == len(stream.records)
            assert all(gate.is_finished for gate in self.gates)
            self.env.shutdown()
        with self.env.lock:
            for *_, buffer in self.held:
                buffer.recycle()
        assert self.env.leaks() == []


class TcpMachine(NetworkMachine):
    """The same, with ``flow_control = "tcp"``: no credit, a full receiver stalls the link."""

    flow_control: FlowControl = "tcp"


def test_credit_based_flow_control_conserves_everything() -> None:
    run_state_machine_as_test(NetworkMachine, settings=SETTINGS)


def test_tcp_flow_control_conserves_everything() -> None:
    run_state_machine_as_test(TcpMachine, settings=SETTINGS)


# -- bugs found by the machines and by reading the code: the correct behaviour, to un-skip ------


@pytest.mark.parametrize("how", ["emit", "writer", "write_all"])
def test_a_buffer_filled_exactly_is_finished_at_once(
    make_env: Callable[..., NetworkEnvironment], how: str
) -> None:
    """Flink finishes a full buffer right after the record that filled it (``flushed when full``,
    DESIGN.md), so the consumer can read it without waiting for the output flusher."""
    env = make_env(segment_size=256, task_managers=1)
    partition = env.create_partition(0, 1, "producer")
    gate = env.create_gate(0, [(partition, 0)], "consumer")
    partition.emit("a", 56, 0)
    if how == "emit":
        partition.emit("b", 200, 0)
    elif how == "writer":
        partition.writer(200)("b", 0)
    else:
        partition.write_all(["b"], 200, 0)
    assert partition.builder_bytes(0) == 0 and partition.backlog(0) == 1
    with env.lock:
        polled = gate.poll_next()
        assert polled is not None and isinstance(polled[0], Buffer)
        assert (polled[0].records, polled[0].size) == (["a", "b"], 256)
        polled[0].recycle()


def test_a_pool_keeps_refilling_while_a_channel_waits_for_floating_buffers() -> None:
    """Flink's pool fetches eagerly "as long as it hasn't reached" its size (FLINK-16972): a
    channel waiting for floating buffers gets every segment the global pool gets back."""
    network = NetworkBufferPool(9, 256)
    with network.lock:
        floating = network.create_pool(1, 4)
        output = network.create_pool(
            1, 4, num_subpartitions=1, max_buffers_per_channel=10, max_overdraft=2
        )
        held = [output.request_memory_segment(0) for _ in range(6)]  # 4 + 2 overdraft
        gate = InputGate("consumer", floating, threading.Condition(network.lock))
        channel = RemoteInputChannel(gate, 0, network, 1)
        gate.channels.append(channel)
        channel.on_sender_backlog(10)  # wants 11 buffers: gets 2 floating, the global pool is dry
        assert channel.available_floating == 2 and network.available_segments == 0
        for segment in held[-2:]:  # the two overdraft segments go back to the global pool
            assert segment is not None
            output.recycle(segment, 0)
        assert channel.available_floating == 4  # the floating pool's size
        assert network.available_segments == 0
