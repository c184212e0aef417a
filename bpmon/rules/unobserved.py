"""Say which evidence the target could not give, where a cause could have rested on it.

A rule that needs a signal the target lacks (:mod:`bpmon.model.signals`) does not fire: its inputs
are simply unknown. The report must not read as if it had looked and found nothing, so one
``unobserved`` finding names what was not available for this job and what that leaves out. A signal
is named only where it could matter here: spill figures for a job with hybrid or blocking exchanges,
chain samples for a job with a chained vertex.
"""

from __future__ import annotations

from bpmon.model.signals import Signal, unavailable
from bpmon.model.values import Finding, Observation

CONSEQUENCES: dict[Signal, str] = {
    Signal.SAMPLES: "stack samples (levels come from the time accounting)",
    Signal.TIME_ACCOUNTING: "busy and backpressured time (levels from the samples alone)",
    Signal.POOL_USAGE: "buffer pool usage (a network cause is inferred, with less confidence)",
    Signal.RECORD_RATES: "record rates (no capacity, no sizing, skew not told from a slow "
    "instance)",
    Signal.PENDING_RECORDS: "the sources' pendingRecords (the offered load is estimated from "
    "what the sources emit, a lower bound)",
    Signal.CHAIN_SAMPLES: "which chained operator is on the stack (a chain is named whole)",
    Signal.TASK_STATES: "task states and free slots (a subtask without a slot shows only as "
    "not sampled)",
    Signal.SLOT_REQUESTS: "which region waits for how many slots (sized from the free slots)",
    Signal.CHANNELS: "per-channel readings (a network cause rests on idle consumers and their "
    "input pools alone)",
    Signal.SPILL: "spill figures (spilling cannot be named)",
    Signal.CHECKPOINTS: "checkpoints (no checkpoint is tied to the cause)",
}
"""What each missing signal leaves out of the diagnosis, as the finding says it."""


def unobserved_finding(observation: Observation) -> Finding | None:
    """The ``unobserved`` finding of ``observation``, None when nothing relevant is missing."""
    missing = [
        s for s in unavailable(frozenset(Signal), observation.signals) if _matters(s, observation)
    ]
    if not missing:
        return None
    return Finding(
        kind="unobserved",
        vertex=observation.job,
        detail="not observed by this target: " + "; ".join(CONSEQUENCES[s] for s in missing),
    )


def _matters(signal: Signal, observation: Observation) -> bool:
    edges = [e for v in observation.vertices for e in v.inputs]
    if signal is Signal.SPILL:
        return any(e.exchange != "pipelined" for e in edges)
    if signal is Signal.CHAIN_SAMPLES:
        return any(" -> " in v.name for v in observation.vertices)
    if signal is Signal.CHANNELS:
        return bool(edges)
    if signal is Signal.SLOT_REQUESTS:
        return False  # the free slots size the cause as well: nothing is left out
    if signal is Signal.CHECKPOINTS:
        return False  # only a Flink job (or the runtime) takes checkpoints: py-spy's has none
    if signal is Signal.PENDING_RECORDS:
        return any(not v.inputs for v in observation.vertices)
    return True
