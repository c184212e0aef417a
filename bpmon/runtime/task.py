"""A task: one thread per subtask, running a mailbox-style loop over its gates and outputs.

The loop, as Flink's ``StreamTask``: if an output is unavailable the task waits for it (soft
backpressure, :meth:`Task.wait_for_output`); else it takes the next buffer from its gates (round
robin over gates, each gate round robin over its channels) and processes its records a chunk at a
time, checking output availability before each chunk; with no input it waits
(:meth:`Task.wait_for_input`, idle). Writing a record that needs a buffer the pool cannot give
blocks in ``LocalBufferPool.request_buffer_builder_blocking`` (hard backpressure). Those are the
only three places a task thread waits, and the stack collectors know them by name. A legacy
source (``source_api = "legacy"``, Flink's ``SourceFunction`` on its own thread) never checks its
output: it waits only in the buffer request (hard backpressure) and, between records its rate does
not allow yet, in :meth:`Task.legacy_source_sleep` (neither idle nor backpressured).

Time is accounted as Flink does (busy, idle, soft and hard backpressured ms per second over a short
sliding window), and ``cost_us`` is service time (``pacing.ServiceTime``). The output flusher runs
inside the loop: buffers are flushed every ``buffer_timeout_ms``, and the waits are bounded so an
idle or backpressured task still flushes. A source injects the barriers of the checkpoints it is
triggered for; the barriers arriving at the inputs are handled by ``alignment.BarrierHandler``
(aligned or unaligned), which the loop calls for each barrier and finished channel it reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from bpmon.model.errors import WaitCancelledError
from bpmon.runtime.accounting import RateMeter, State, TimeAccount
from bpmon.runtime.alignment import BarrierHandler, BarrierTiming, SnapshotTaken
from bpmon.runtime.buffers import Buffer
from bpmon.runtime.chain import Chain
from bpmon.runtime.debloat import BufferDebloater
from bpmon.runtime.faults import InjectedFault
from bpmon.runtime.gate import InputGate
from bpmon.runtime.noise import cost_noise
from bpmon.runtime.operators import Transform
from bpmon.runtime.pacing import (
    SOURCE_CHUNK,
    RateLimiter,
    ServiceTime,
    chunk_size,
    source_limiter,
)
from bpmon.runtime.routing import Output
from bpmon.runtime.scheduler import TaskState, WaitingForSlots
from bpmon.runtime.subpartition import END_OF_PARTITION, ChannelEvent
from bpmon.scenario import OperatorSpec
from bpmon.scenario.network import DEBLOAT_PERIOD_S


class CheckpointListener(Protocol):
    """Where a task reports the snapshots it takes (the coordinator)."""

    def acknowledge(self, task: Task, checkpoint_id: int, snapshot: SnapshotTaken) -> None:
        """``task`` took the sync part of its snapshot of ``checkpoint_id``."""
        ...


SYNC_S_PER_MB = 0.0005
"""A snapshot's sync phase: 0.5 ms on the task's thread per MB of state, the copy-on-write
snapshot of a heap state (``docs/scenario.md``)."""
MIB = 1 << 20


class Task:
    """One subtask and its thread.

    Args:
        spec: the operator.
        index: the subtask index (0-based).
        task_manager: where it runs.
        gates: one input gate per incoming edge.
        outputs: one output per outgoing edge.
        condition: the task's mailbox: its gates and output pools notify it (network lock).
        cancel: set when the job ends; every wait of the task checks it.
        flush_interval_s: the output flusher period (0: after every chunk).
        aligned: checkpoints start aligned.
        switch_after_s: aligned checkpoints go on unaligned this long after their trigger
            (None: never).
        debloaters: buffer debloating, one per input gate (empty: off).
        clock: monotonic seconds.
        seed: the scenario's seed (noisy costs, ``cost_cv``).
        writers: a chained task: the member that writes each of ``outputs``, by name (empty:
            the chain's last member writes them all).
    """

    def __init__(
        self,
        spec: OperatorSpec,
        index: int,
        task_manager: int,
        gates: Sequence[InputGate],
        outputs: Sequence[Output],
        condition: threading.Condition,
        cancel: threading.Event,
        *,
        flush_interval_s: float,
        aligned: bool = True,
        switch_after_s: float | None = None,
        debloaters: Sequence[BufferDebloater] = (),
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
        writers: Sequence[str] = (),
    ) -> None:
        self.spec = spec
        self.index = index
        self.task_manager = task_manager
        self.name = f"{spec.name} ({index + 1}/{spec.parallelism})"
        self.gates = list(gates)
        self.outputs = list(outputs)
        self.condition = condition
        self._lock = condition  # entering the condition takes the network lock
        self._cancel = cancel
        self._clock = clock
        self._flush_interval = flush_interval_s
        self._next_flush = 0.0
        self.account = TimeAccount(now=clock)
        self.records_in = RateMeter(now=clock)
        self.records_out = RateMeter(now=clock)
        self.buffers_out = RateMeter(now=clock)
        self._buffers_counted = 0
        cost_us = 0.0 if spec.members else spec.cost_of(index)  # a chain's members serve theirs
        noise = cost_noise(cost_us, spec.cost_cv, seed, spec.name, index)
        self.service = ServiceTime(cost_us, now=clock, sleep=self._sleep, noise=noise)
        self._member_outputs = _member_outputs(spec, self.outputs, writers)
        self.chain = (
            Chain(
                spec,
                index,
                self._emit_member,
                [i for i, outs in enumerate(self._member_outputs) if outs],
                now=clock,
                sleep=self._sleep,
                seed=seed,
            )
            if spec.members
            else None
        )
        """The operators of a chained task, run nested (None: one operator)."""
        self._chunk = chunk_size(
            spec,
            self.chain.cost_us() if self.chain else spec.cost_of(index),
            self.outputs[0].partition.segment_size if self.outputs else None,
        )
        self._transform = Transform(spec)
        self._fault = InjectedFault.of(spec.fail, index, self.name, clock)
        self._limiter = source_limiter(spec, index, clock) if spec.kind == "source" else None
        self.legacy_source = spec.kind == "source" and spec.source_api == "legacy"
        """A ``SourceFunction``: no output checks, no idle time, busy time not measured."""
        self._gate_turn = 0
        self._checkpoint: CheckpointListener | None = None
        self._mail = False
        """Set (lock held) when the coordinator has something for the task: a trigger, an abort,
        an aligned timeout; the loop reads it on every turn."""
        self._pending_trigger: tuple[int, float] | None = None
        self._abort_to = 0
        self.state_bytes = state_bytes(spec)
        """The size of the subtask's state: what its snapshots copy and upload."""
        self.barriers = BarrierHandler(
            self.gates,
            aligned=aligned,
            lock=condition,
            clock=clock,
            forward=self._forward_barrier,
            acknowledge=self._snapshot,
            switch_after_s=switch_after_s,
        )
        self.debloaters = list(debloaters)
        """One per input gate with buffer debloating on (FLIP-183); evaluated every 200 ms."""
        self._next_debloat = 0.0
        self.error: BaseException | None = None
        self.on_failure: Callable[[Task, BaseException], None] | None = None
        self.on_finished: Callable[[Task], None] | None = None
        self.state = TaskState.CREATED
        """Flink's execution state; the scheduler moves it to SCHEDULED and DEPLOYING."""
        self.slot_wait: WaitingForSlots | None = None
        """While SCHEDULED: its region, the slots the region lacks, and since when it waits."""
        for output in self.outputs:
            output.partition.hard_backpressure = self._hard_backpressure
        self.thread = threading.Thread(target=self._main, name=self.name, daemon=True)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def limiter(self) -> RateLimiter | None:
        """A source's rate limiter (None for other kinds): readers may call its ``schedule()``."""
        return self._limiter

    def start(self, checkpoint: CheckpointListener | None = None) -> None:
        """Start the task's thread."""
        self._checkpoint = checkpoint
        self._next_flush = self._clock() + self._flush_interval
        if self._fault is not None:
            self._fault.start()
        for gate in self.gates:
            gate.request_partitions()
        self.thread.start()

    def trigger_checkpoint(self, checkpoint_id: int, triggered_at: float) -> None:
        """A source gets a checkpoint to inject (the coordinator calls this, lock held)."""
        self._pending_trigger = (checkpoint_id, triggered_at)
        self._mail = True
        self.condition.notify_all()

    def abort_checkpoint(self, checkpoint_id: int) -> None:
        """The coordinator gave ``checkpoint_id`` up (lock held)."""
        self._abort_to = max(self._abort_to, checkpoint_id)
        if self._pending_trigger is not None and self._pending_trigger[0] <= checkpoint_id:
            self._pending_trigger = None
        self._mail = True
        self.condition.notify_all()

    def check_aligned_timeout(self) -> None:
        """The current checkpoint passed its aligned timeout (the coordinator, lock held)."""
        self._mail = True
        self.condition.notify_all()

    def _main(self) -> None:
        self.state = TaskState.RUNNING
        # busy from its first instruction: a source that is always behind its schedule never
        # waits, so no wait's end would ever mark it busy (it read idle all along)
        self.account.mark(State.BUSY)
        try:
            if self._limiter is not None:
                self._run_source(self._limiter)
            else:
                self._run_operator()
        except WaitCancelledError:
            self.state = TaskState.CANCELED
        except BaseException as exc:  # a failed task fails the job, whatever it raised
            self.state = TaskState.FAILED
            self.error = exc
            if self.on_failure is not None:
                self.on_failure(self, exc)
        else:
            self.state = TaskState.FINISHED
        finally:
            self.account.mark(State.IDLE)
        if self.state == TaskState.FINISHED and self.on_finished is not None:
            self.on_finished(self)

    def _sleep(self, seconds: float) -> None:
        if self._cancel.wait(seconds):
            raise WaitCancelledError(f"{self.name}: cancelled")

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise WaitCancelledError(f"{self.name}: cancelled")

    # -- the loops --------------------------------------------------------------------------

    def _run_source(self, limiter: RateLimiter) -> None:
        """Emit records at the source's rate; a bounded one (``records``) then finishes.

        A FLIP-27 source runs in the mailbox: it waits for an unavailable output (soft
        backpressure) and, idle, for its next record. A legacy one emits blindly and blocks in
        the buffer request when the pool is empty (hard backpressure).
        """
        next_record = 0
        bound = self.spec.records
        legacy = self.legacy_source
        while bound is None or next_record < bound:
            self._housekeeping()
            if not legacy and not self._outputs_available():
                self.wait_for_output()
                continue
            left = SOURCE_CHUNK if bound is None else bound - next_record
            count = limiter.permits(min(SOURCE_CHUNK, self._chunk, left))
            if count == 0:
                if legacy:
                    self.legacy_source_sleep(limiter.time_until_next())
                else:
                    self.wait_for_input(limiter.time_until_next())
                continue
            if self._fault is not None:
                count = self._fault.allow(count)
            records = list(range(next_record, next_record + count))
            next_record += count
            if self.chain is not None:
                self.chain.from_source(records)
                continue
            self.service.charge(count)
            self._emit(records)
        self.service.settle()
        self._finish()

    def _run_operator(self) -> None:
        while True:
            self._housekeeping()
            if not self._outputs_available():
                self.wait_for_output()
                continue
            polled = self._poll()
            if polled is None:
                if all(gate.is_finished for gate in self.gates):
                    self._finish()
                    return
                self.wait_for_input(self._flush_interval or 0.05)
                continue
            item, gate_index, channel = polled
            if isinstance(item, Buffer):
                try:
                    self._process(item.records)
                finally:
                    with self._lock:
                        item.recycle()
            elif item is not END_OF_PARTITION:
                self.barriers.on_event(item, gate_index, channel)
            else:
                self.barriers.on_channel_finished()

    def _process(self, records: list[object]) -> None:
        # Records in are counted as they are processed, chunk by chunk, as Flink's numRecordsIn
        # is: counting a whole buffer when it is taken off the queue overstates the rate a busy
        # subtask processes by up to a buffer per window, and with it the capacity measured.
        done, total, chunk = 0, len(records), self._chunk
        while done < total:
            if not self._outputs_available():
                self.wait_for_output()
            part = records[done : done + chunk] if total > chunk else records
            if self._fault is not None:
                part = part[: self._fault.allow(len(part))]
            if self.chain is not None:
                self.records_in.add(len(part))
                self.chain.apply(part)
                done += len(part)
                continue
            self.service.charge(len(part))
            self.records_in.add(len(part))
            self._emit(self._transform.apply(part))
            done += len(part)

    def _emit(self, records: Sequence[object]) -> None:
        if records:
            for output in self.outputs:
                output.write(records)
            self.records_out.add(len(records))

    def _emit_member(self, position: int, records: Sequence[object]) -> None:
        """Records chain member ``position`` emitted, to its outputs that leave the task."""
        for output in self._member_outputs[position]:
            output.write(records)
        self.records_out.add(len(records))

    def _poll(self) -> tuple[Buffer | ChannelEvent, int, int] | None:
        gates = self.gates
        with self._lock:
            for step in range(len(gates)):
                turn = (self._gate_turn + step) % len(gates)
                polled = gates[turn].poll_next()
                if polled is not None:
                    self._gate_turn = (turn + 1) % len(gates)
                    return polled[0], turn, polled[1]
        return None

    def _outputs_available(self) -> bool:
        return all(output.partition.pool.is_available for output in self.outputs)

    def _housekeeping(self) -> None:
        self._check_cancel()
        if self._fault is not None:
            self._fault.check()
        finished = sum(output.partition.buffers_out for output in self.outputs)
        if finished != self._buffers_counted:
            self.buffers_out.add(finished - self._buffers_counted)
            self._buffers_counted = finished
        if self._mail:
            self._read_mail()
        if self._clock() >= self._next_flush:
            self._flush()

    def _flush(self) -> None:
        for output in self.outputs:
            output.partition.flush_all()
        now = self._clock()
        self._next_flush = now + self._flush_interval
        if self.debloaters and now >= self._next_debloat:
            self._next_debloat = now + DEBLOAT_PERIOD_S
            with self._lock:
                for debloater in self.debloaters:
                    debloater.evaluate()

    def _finish(self) -> None:
        for output in self.outputs:
            output.partition.finish()

    # -- the waits (one named function each) -----------------------------------------------

    def wait_for_input(self, timeout: float) -> None:
        """Wait for input (idle): until a gate has data, the flusher is due, or ``timeout``."""
        self.service.settle()
        self.account.mark(State.IDLE)
        with self._lock:
            if not self._input_or_mail():
                self.condition.wait(max(0.0, min(timeout, self._until_flush())))
        self._check_cancel()
        self.account.mark(State.BUSY)

    def legacy_source_sleep(self, seconds: float) -> None:
        """A legacy source's own thread sleeping until its next record is due (its rate).

        Not the mailbox's wait, so Flink counts it neither idle nor backpressured; its busy
        time is not measured at all (``busyTimeMsPerSecond`` is NaN).
        """
        self.service.settle()
        self.account.mark(State.BUSY)  # never idle: Flink's mailbox timer does not run for it
        self._sleep(max(0.0, min(seconds, self._until_flush())))

    def wait_for_output(self) -> None:
        """Wait for every output to become available again (soft backpressure).

        The task stays responsive: it flushes on time and reacts to unaligned barriers, which
        overtake the data it cannot process.
        """
        self.service.settle()
        self.account.mark(State.SOFT_BP)
        while not self._outputs_available():
            priority = None
            with self._lock:
                if self._cancel.is_set() or self._outputs_available():
                    break
                if not self._mail:
                    priority = self.barriers.priority_barrier()
                    if priority is None:
                        self.condition.wait(max(0.001, self._until_flush()))
                        priority = self.barriers.priority_barrier()
            self._check_cancel()
            if self._mail:
                self._read_mail()
            if priority is not None:
                self.barriers.on_event(*priority)
            if self._clock() >= self._next_flush:
                self._flush()
        self._check_cancel()
        self.account.mark(State.BUSY)

    def _until_flush(self) -> float:
        """How long a wait may last before the flusher is due.

        With ``buffer_timeout_ms = 0`` the loop flushes after every chunk, so nothing is ever
        pending when the task waits: the wait is bounded only to re-check its conditions.
        """
        if self._flush_interval <= 0:
            return 0.1
        return self._next_flush - self._clock()

    def _input_or_mail(self) -> bool:
        if self._cancel.is_set() or self._mail:
            return True
        return any(gate.is_available for gate in self.gates)

    def _hard_backpressure(self, blocked: bool) -> None:
        self.account.mark(State.HARD_BP if blocked else State.BUSY)

    # -- checkpoints ------------------------------------------------------------------------

    def _read_mail(self) -> None:
        """What the coordinator asked for: abort, switch to unaligned, inject a barrier. The
        flag is cleared before the requests are read, so none set meanwhile is lost."""
        self._mail = False
        if self._abort_to:
            self.barriers.abort(self._abort_to)
        self.barriers.check_timeout()
        trigger, self._pending_trigger = self._pending_trigger, None
        if trigger is not None:  # a source has no input to align
            checkpoint_id, triggered_at = trigger
            injected_at = self._clock()
            barrier = self.barriers.barrier(checkpoint_id, triggered_at)
            overtaken = self._forward_barrier(barrier)
            timing = BarrierTiming(
                triggered_at,
                injected_at,
                persisted_bytes=overtaken if barrier.priority else 0,
                unaligned=barrier.priority,
            )
            self._snapshot(checkpoint_id, timing)

    def _forward_barrier(self, barrier: ChannelEvent) -> int:
        return sum(output.partition.add_event(barrier) for output in self.outputs)

    def _snapshot(self, checkpoint_id: int, timing: BarrierTiming) -> None:
        """The snapshot's sync phase, on the task's thread (busy), then to the coordinator,
        which waits for its upload (the async phase)."""
        sync_s = self.state_bytes / MIB * SYNC_S_PER_MB
        if sync_s > 0:
            self.service.settle()
            self.account.mark(State.BUSY)
            self._sleep(sync_s)
        if self._checkpoint is not None:
            taken = SnapshotTaken(timing, sync_s, self.state_bytes)
            self._checkpoint.acknowledge(self, checkpoint_id, taken)


def state_bytes(spec: OperatorSpec) -> int:
    """A subtask's state: its ``state_mb``, a chain's members' together."""
    return int(sum(m.state_mb or 0.0 for m in spec.members or (spec,)) * MIB)


def _member_outputs(
    spec: OperatorSpec, outputs: Sequence[Output], writers: Sequence[str]
) -> list[list[Output]]:
    """A chained task's outputs by the position of the member that writes each (the last
    member when ``writers`` is empty); empty for one operator."""
    names = [m.name for m in spec.members]
    by_member: list[list[Output]] = [[] for _ in names]
    if not names:
        return by_member
    for i, output in enumerate(outputs):
        by_member[names.index(writers[i]) if writers else -1].append(output)
    return by_member
