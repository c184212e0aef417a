"""A compiled job plan as text and as JSON values: what ``bpmon plan`` prints.

Kept apart from ``compiled.py`` (which decides the plan) so that the decisions read on their own.
"""

from __future__ import annotations

from bpmon.model.numbers import counted
from bpmon.scenario.compiled import JobPlan


def plan_to_dict(plan: JobPlan) -> dict[str, object]:
    """The plan as JSON-ready values (``bpmon plan --json``), field names as in the dataclasses."""
    return {
        "job": plan.job,
        "mode": plan.mode,
        "task_managers": plan.task_managers,
        "slots_per_task_manager": plan.slots_per_task_manager,
        "slots": plan.slots,
        "slots_all_at_once": plan.slots_all_at_once,
        "min_slots": plan.min_slots,
        "regions": [
            {
                "index": r.index,
                "vertices": list(r.vertices),
                "slots": r.slots,
                "blocking_inputs": list(r.blocking_inputs),
                "hybrid_inputs": list(r.hybrid_inputs),
            }
            for r in plan.regions
        ],
        "groups": [
            {
                "name": g.name,
                "vertices": list(g.vertices),
                "slots": g.slots,
                "managed_memory_mb": g.managed_memory_mb,
            }
            for g in plan.groups
        ],
        "operators": [
            {
                "name": o.name,
                "parallelism": o.parallelism,
                "region": o.region,
                "group": o.group,
                "task": o.task,
                "fraction": o.fraction,
                "managed_memory_mb": o.managed_memory_mb,
            }
            for o in plan.operators
        ],
        "edges": [
            {
                "from": e.source,
                "to": e.target,
                "partitioner": e.partitioner,
                "exchange": e.exchange,
                "written": e.written,
                "reason": e.reason,
            }
            for e in plan.edges
        ],
    }


def plan_lines(plan: JobPlan) -> list[str]:
    """The plan as plain text lines (``bpmon plan``): slots, regions, groups, operators, edges."""
    fits = "fits" if plan.slots >= plan.min_slots else "too few slots: the job cannot run"
    lines = [
        f"{plan.job} ({plan.mode}): {counted(plan.task_managers, 'task manager')} x "
        f"{counted(plan.slots_per_task_manager, 'slot')} = {counted(plan.slots, 'slot')}; needs "
        f"{plan.slots_all_at_once} to run all regions at once, at least {plan.min_slots} ({fits})",
        "",
        "regions (scheduled as bulks of slots):",
    ]
    for r in plan.regions:
        after = [f"after region {i} finished" for i in r.blocking_inputs]
        after += [f"once region {i} runs (hybrid)" for i in r.hybrid_inputs]
        when = "; starts " + ", ".join(after) if after else ""
        lines.append(f"  {r.index}: {', '.join(r.vertices)} — {r.slots} slots{when}")
    lines += ["", "slot sharing groups:"]
    for g in plan.groups:
        lines.append(
            f"  {g.name}: {', '.join(g.vertices)} — {g.slots} slots, "
            f"{g.managed_memory_mb:g} MB managed memory per slot"
        )
    lines += ["", "operators:"]
    width = max(len(o.name) for o in plan.operators)
    for o in plan.operators:
        memory = (
            f"{o.managed_memory_mb:g} MB managed memory (fraction {o.fraction:.3g})"
            if o.fraction is not None
            else "no managed memory"
        )
        task = f", task {o.task!r}" if o.task != o.name else ""
        lines.append(
            f"  {o.name:<{width}}  x{o.parallelism}  region {o.region}, group {o.group}{task}, "
            f"{memory}"
        )
    changed = [e for e in plan.edges if e.reason]
    if changed:
        lines += ["", "exchanges changed by compilation:"]
        lines += [
            f"  {e.source} -> {e.target}: {e.written} -> {e.exchange} ({e.reason})" for e in changed
        ]
    return lines
