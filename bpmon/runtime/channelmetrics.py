"""Per-channel evidence on the execution graph: what waits on each producer -> consumer channel.

Vertex and subtask metrics say *that* a subtask waits; the channels say *on whom*. One
:class:`ChannelReading` per input channel of every subtask, i.e. per (producing subtask,
consuming subtask) pair an exchange connects, with what Flink shows per channel
(``docs/report.md``, ``channels``):

- ``backlog``: finished buffers queued in the producer's subpartition for this consumer (the
  backlog a credit-based sender announces). A slow consumer subtask fills the subpartitions of
  its channels, and only those, up to ``max_buffers_per_channel``.
- ``credit``: on a remote channel under credit-based flow control, the credit the sender holds:
  buffers the consumer has free for it. 0 with a backlog means the consumer is full.
- ``queued_at_consumer``: buffers received on a remote channel and not read yet (the channel's
  input buffers). A local channel reads the producer's subpartition directly and holds none: its
  waiting data is the ``backlog``.
- ``connection`` / ``connection_stalled``: the connection a remote channel crosses, and whether
  it stopped reading because a receiver had no buffer (``tcp`` only; a stalled connection stops
  every channel of its exchange between the two task managers).
- ``blocked``: the consumer stopped reading the channel until an aligned checkpoint's barrier
  arrived on all its channels; the consumer then waits for the barriers of its other channels.

Reading takes no lock and stops nothing, as ``netmetrics.py``: every value is an int or a bool
another thread updates whole, so a reading may be one buffer stale, never torn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bpmon.runtime.connection import ConnectionID, SenderView
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputChannel, LocalInputChannel
from bpmon.runtime.subpartition import ResultSubpartition
from bpmon.runtime.task import Task


@dataclass(frozen=True, slots=True)
class ChannelReading:
    """One input channel at one instant: producer subtask -> consumer subtask.

    Attributes:
        producer: the producing vertex.
        producer_index: the producing subtask.
        producer_task_manager: where the producing subtask runs.
        consumer: the consuming vertex.
        consumer_index: the consuming subtask.
        consumer_task_manager: where the consuming subtask runs.
        edge: which input of the consumer the channel belongs to (its input gate, in the
            order of the operator's ``inputs``).
        subpartition: the producer's subpartition the channel reads.
        remote: True when the two subtasks run on different task managers.
        backlog: finished buffers queued in that subpartition.
        credit: remote channels under credit-based flow control: the sender's credit; None for
            local channels and under ``tcp``.
        queued_at_consumer: buffers received and not yet read (0 for a local channel).
        connection: the connection a remote channel crosses (None when local).
        connection_stalled: ``tcp`` only: the connection stopped reading for want of a receive
            buffer; None for local channels and under credit.
        blocked: its barrier arrived and the consumer reads it no more until it aligned.
    """

    producer: str
    producer_index: int
    producer_task_manager: int
    consumer: str
    consumer_index: int
    consumer_task_manager: int
    edge: int
    subpartition: int
    remote: bool
    backlog: int
    credit: int | None
    queued_at_consumer: int
    connection: ConnectionID | None
    connection_stalled: bool | None
    blocked: bool


def channel_readings(tasks: Mapping[str, Sequence[Task]]) -> list[ChannelReading]:
    """Every input channel of every subtask now (any thread; ``job.tasks`` is the argument).

    In the order of ``tasks`` (vertices in topological order, subtasks in index order), then
    by input edge and channel.

    Raises:
        ValueError: a channel reads a partition none of ``tasks`` writes (readings of part of a
            job).
    """
    producers = {
        id(output.partition): task
        for group in tasks.values()
        for task in group
        for output in task.outputs
    }
    readings = []
    for group in tasks.values():
        for consumer in group:
            for edge, gate in enumerate(consumer.gates):
                for channel in gate.channels:
                    readings.append(_reading(channel, consumer, edge, producers))
    return readings


def _reading(
    channel: InputChannel, consumer: Task, edge: int, producers: Mapping[int, Task]
) -> ChannelReading:
    subpartition = _subpartition(channel)
    producer = producers.get(id(subpartition.partition))
    if producer is None:
        raise ValueError(
            f"channel_readings: {channel.gate.name} reads {subpartition.partition.name}, which "
            "no task given writes: pass every task of the job (job.tasks)"
        )
    credit: int | None = None
    stalled: bool | None = None
    connection: ConnectionID | None = None
    queued = 0
    if isinstance(channel, RemoteInputChannel):
        queued = channel.queue_length()
        sender = channel.sender
        if isinstance(sender, SenderView):  # the connection it comes over
            link = sender.connection
            connection = link.id
            if link.credit_based:
                credit = sender.credit
            else:
                stalled = link.stalled
    return ChannelReading(
        producer=producer.spec.name,
        producer_index=producer.index,
        producer_task_manager=producer.task_manager,
        consumer=consumer.spec.name,
        consumer_index=consumer.index,
        consumer_task_manager=consumer.task_manager,
        edge=edge,
        subpartition=subpartition.index,
        remote=isinstance(channel, RemoteInputChannel),
        backlog=subpartition.backlog,
        credit=credit,
        queued_at_consumer=queued,
        connection=connection,
        connection_stalled=stalled,
        blocked=channel.gate.is_blocked(channel.index),
    )


def _subpartition(channel: InputChannel) -> ResultSubpartition:
    """The producer's subpartition a channel reads (directly, or through its sender)."""
    if isinstance(channel, LocalInputChannel):
        return channel.subpartition
    if isinstance(channel, RemoteInputChannel) and channel.sender is not None:
        return channel.sender.subpartition
    raise ValueError(f"channel_readings: channel {channel.index} of {channel.gate.name} is unbound")
