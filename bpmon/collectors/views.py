"""A window cut down to what another target would have observed of the same job.

bpmon's runtime observes every :class:`~bpmon.model.signals.Signal`; a Flink cluster shows fewer,
py-spy fewer still. :func:`observed_as` removes from a runtime window whatever a target with
``signals`` would not have measured, so ``bpmon run SCENARIO --observe flink`` diagnoses the same
job from only what Flink's REST API and its samples give, and the accuracy figures can say how much
of a verdict rests on what only the runtime sees. Nothing is estimated in place of what is removed:
it becomes unknown (``None``, empty), exactly as the other target's collector leaves it.
"""

from __future__ import annotations

from dataclasses import replace

from bpmon.model.signals import Signal
from bpmon.model.values import Metrics, Observation, SubtaskWindow, VertexObservation


def observed_as(observation: Observation, signals: frozenset[Signal]) -> Observation:
    """``observation`` as a target observing only ``signals`` would have seen it."""
    keep = signals & observation.signals
    vertices = tuple(_vertex(v, keep) for v in observation.vertices)
    channels = observation.channels if Signal.CHANNELS in keep else ()
    checkpoints = observation.checkpoints if Signal.CHECKPOINTS in keep else None
    return replace(
        observation, vertices=vertices, channels=channels, checkpoints=checkpoints, signals=keep
    )


def _vertex(vertex: VertexObservation, keep: frozenset[Signal]) -> VertexObservation:
    return replace(vertex, subtasks=tuple(_subtask(s, keep) for s in vertex.subtasks))


def _subtask(sub: SubtaskWindow, keep: frozenset[Signal]) -> SubtaskWindow:
    if Signal.SAMPLES not in keep:
        sub = replace(sub, samples=0, backpressured=0, idle=0, busy=0)
    if Signal.SAMPLES not in keep or Signal.CHAIN_SAMPLES not in keep:
        sub = replace(sub, chain_samples=())
    return replace(sub, metrics=_metrics(sub.metrics, keep))


def _metrics(m: Metrics, keep: frozenset[Signal]) -> Metrics:
    if Signal.TIME_ACCOUNTING not in keep:
        m = replace(
            m,
            busy_ratio=None,
            idle_ratio=None,
            backpressured_time_ratio=None,
            soft_backpressured_ratio=None,
            hard_backpressured_ratio=None,
            accounting_span_ms=None,
        )
    if Signal.POOL_USAGE not in keep:
        m = replace(m, out_pool_usage=None, in_pool_usage=None)
    if Signal.RECORD_RATES not in keep:
        m = replace(m, records_in_per_s=None, records_out_per_s=None)
    if Signal.PENDING_RECORDS not in keep:
        m = replace(m, backlog=None)
    if Signal.SPILL not in keep:
        m = replace(m, spill=None)
    if Signal.TASK_STATES not in keep:
        m = replace(m, scheduling=None)
    elif Signal.SLOT_REQUESTS not in keep and m.scheduling is not None:
        m = replace(m, scheduling=replace(m.scheduling, slot_wait=None))
    return m
