"""The autoscaler's second opinion for people: one line per verdict that is not agreement, or one
line saying it agrees (``docs/autoscaler.md``).
"""

from __future__ import annotations

from bpmon.model.autoscaler import AutoscalerReport

TITLE = "Flink's autoscaler on this window"


def opinion_lines(autoscaler: AutoscalerReport) -> list[str]:
    """``scales-ineffectively at aggregate: it would scale aggregate 4 -> 10, but ...`` for each
    disagreement; what it would do where it agrees; a line when it would not scale at all."""
    disagree = [v for v in autoscaler.verdicts if v.verdict != "agrees"]
    if disagree:
        return [f"{v.verdict} at {v.vertex}: {v.detail}" for v in disagree]
    agrees = [v for v in autoscaler.verdicts if v.verdict == "agrees"]
    if agrees:
        return [f"agrees at {v.vertex}: {v.detail}" for v in agrees]
    if not autoscaler.acts:
        return ["it would not scale: every vertex's processing rate is within its bounds"]
    changed = [
        f"{v.name} {v.parallelism} -> {v.recommended_parallelism}"
        for v in autoscaler.vertices
        if v.recommended_parallelism != v.parallelism
    ]
    return ["it would scale " + ", ".join(changed)] if changed else []
