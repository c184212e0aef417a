"""Buffer debloating (FLIP-183) was on: say so, with the buffer sizes it chose.

With ``taskmanager.network.memory.buffer-debloat.enabled`` each input gate sizes its buffers to
hold about ``buffer-debloat.target`` (1 s) of its measured throughput, re-evaluated every
200 ms. The buffer *counts* stay, so ``inPoolUsage`` and ``outPoolUsage`` still count buffers in
use over buffers there are, but of a smaller size: a full pool holds less data, and backpressure
builds, and clears, with less of it in flight. bpmon's levels rest on the stack samples and the
time accounting (a task blocked in a buffer request is blocked whatever the buffer's size), so
no verdict changes with it; a reader comparing pool usages or in-flight bytes across runs needs
to know. The ``debloating`` finding says it was on, the target, and the sizes the gates chose
(Flink's ``debloatedBufferSize``, each subtask's first input gate; bpmon's runtime, the least of
its gates), the smallest and where.
"""

from __future__ import annotations

from bpmon.model.values import Finding, Observation


def debloat_finding(observation: Observation) -> Finding | None:
    """The ``debloating`` finding of a window whose target says debloating is on, else None."""
    settings = observation.settings
    if not settings.debloat:
        return None
    target = settings.debloat_target_ms
    aim = f"about {target:,.0f} ms" if target is not None else "about the target's worth"
    sized = [
        (s.metrics.buffer_size, v.name)
        for v in observation.vertices
        for s in v.subtasks
        if s.metrics.buffer_size is not None
    ]
    if sized:
        least, where = min(sized)
        most = max(size for size, _ in sized)
        span = f"{least:,.0f}" if least == most else f"{least:,.0f}-{most:,.0f}"
        shown = f"now {span} bytes (debloatedBufferSize; the smallest at {where})"
    else:
        shown = "their sizes were not shown (no debloatedBufferSize)"
    configured = (
        f", of {settings.segment_size:,} configured" if settings.segment_size is not None else ""
    )
    return Finding(
        "debloating",
        observation.job,
        f"buffer debloating is on (taskmanager.network.memory.buffer-debloat.enabled): each "
        f"input gate sizes its buffers to hold {aim} of its throughput, {shown}{configured}; "
        "pool usages count these smaller buffers, and the levels rest on the stack samples and "
        "the time accounting, which debloating leaves as they are",
    )
