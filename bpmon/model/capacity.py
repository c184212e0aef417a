"""A vertex's capacity per subtask, defined once: the records/s one subtask handles at 100% busy.

The report (the rules size a bottleneck with it), the comparison of two runs (the dashboard's
Compare page) and the history's analysis (``bpmon analyze``: Spark expresses the same figure from
the same parameters, ``bpmon.history.analytics``) all compute it here, from ``[capacity] min_busy``
of the rules (``rules/backpressure.toml``):

- a **subtask's figure** is the records it handles per second over its busy ratio, Flink's
  autoscaler's *true processing rate*: its records in, or its records out when it receives none
  (a source). Only a subtask at least ``min_busy`` busy that handled records gives one;
- the **vertex's** is the **mean** of its subtasks' figures.

Why the mean: a vertex handles the sum of what its subtasks handle, n times the mean, and that
sum is what a parallelism is sized from. The median ignores a subtask that differs: with figures
of 1,000, 1,000 and 2,000 the vertex takes 4,000 records/s, 1,333 per subtask; the median says
1,000 and would size a quarter too many subtasks.

Why a least busy share: busy time that is not spent on records (flushing buffers on the output
flusher's timer, timers, waking up for a record; more of it on a loaded machine) is divided into
the records as well, so a subtask's figure reads low by that time over its busy share, and moves
with the load rather than with the operator. bpmon's runtime spends about 2 ms a second so: a map
of 1 ms a record reads 750 records/s at 1% busy, 930 at 3%, 960 at 5% and 970 at 10% (1,000 at
40%). A machine or a job with 10 ms a second of it reads 20% low at 5% busy, as much as a capacity
drop (``[history] capacity_drop``), so a vertex 6% busy in one run and 3% in the next "drops" by
noise alone. ``min_busy`` is 0.1: such time must then reach 20 ms a second to move a figure by a
capacity drop. A subtask less busy says nothing about its capacity, and a vertex whose subtasks all
are has none (None): what is not measured is not compared. Diagnosed from the same windows with 0.1
and with 0.05, the 145 scenario files of the diagnosis corpus keep every cause, kind, subtask,
parallelism and recommendation; only the evidence of two slow instances changes (their healthy
siblings, 7-10% busy, lose or shift their figure); 0.2 loses that figure in ten.

A capacity per subtask measured at another parallelism is another measurement (fewer records per
subtask, more subtasks sharing a machine), and a level that worsened after a vertex lost subtasks
is no slower operator: every comparison of two runs says when a parallelism changed between them
(:func:`explained`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

MIN_BUSY = 0.1
"""The default ``[capacity] min_busy``: the least busy share a subtask's figure is taken from."""

Figures = tuple[float | None, float | None, float | None]
"""One subtask's records in per second, records out per second and busy ratio."""


def handled_rate(records_in: float | None, records_out: float | None) -> float | None:
    """The records/s a subtask handles: its records in, or its records out when it receives
    none (a source)."""
    if records_in is not None and math.isfinite(records_in) and records_in > 0:
        return records_in
    if records_out is not None and math.isfinite(records_out):
        return records_out
    return None


def subtask_capacity(figures: Figures, min_busy: float) -> float | None:
    """One subtask's records/s at 100% busy, or None when it is less than ``min_busy`` busy or
    handled no records."""
    records_in, records_out, busy = figures
    rate = handled_rate(records_in, records_out)
    if rate is None or rate <= 0 or busy is None or not math.isfinite(busy):
        return None
    return rate / busy if busy >= min_busy else None


def capacity_per_subtask(subtasks: Iterable[Figures], min_busy: float) -> float | None:
    """A vertex's capacity per subtask: the mean of its subtasks' figures (None: none has one)."""
    known = [c for c in (subtask_capacity(f, min_busy) for f in subtasks) if c is not None]
    return sum(known) / len(known) if known else None


def parallelism_change(vertex: str, before: int | None, after: int | None) -> str | None:
    """``enrich runs 6 subtasks instead of 2`` when the parallelism changed, else None."""
    if before is None or after is None or before == after:
        return None
    return f"{vertex} runs {after} subtasks instead of {before}"


def explained(detail: str, rescaled: Sequence[str]) -> str:
    """``detail`` of a change between two runs, then the parallelism changes between them
    (:func:`parallelism_change` lines), which may explain it rather than the operators."""
    if not rescaled:
        return detail
    return f"{detail}; {', '.join(rescaled)}: the parallelism changed between the runs"
