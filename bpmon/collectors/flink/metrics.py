"""Flink's task metrics over REST, read per vertex in one request, as the model's Metrics.

``GET /jobs/{id}/vertices/{vertex}/metrics?get=0.busyTimeMsPerSecond,1.busyTimeMsPerSecond,...``
returns every subtask's value of every metric asked for at once (ids ``"<subtask>.<metric>"``,
values as strings); a metric that has no value is left out of the answer, not an error. The names
changed over Flink's versions, so each quantity has candidates, tried in order:

- pool usage: ``Shuffle.Netty.Output.Buffers.outPoolUsage`` (Flink 1.9+; the only one in 2.x),
  then the legacy ``buffers.outPoolUsage`` (registered beside it until 1.x);
- time accounting: ``busyTimeMsPerSecond``, ``idleTimeMsPerSecond``,
  ``backPressuredTimeMsPerSecond``, ``softBackPressuredTimeMsPerSecond`` and
  ``hardBackPressuredTimeMsPerSecond`` (Flink 1.13+). Without them (Flink 1.12 and older) there is
  nothing to diagnose soft backpressure with: :func:`resolve_names` says so in one line.

A source's FLIP-33 ``pendingRecords`` (a Kafka source's lag) is an operator metric, listed as
``"<subtask>.<operator>.pendingRecords"`` (``0.Source__orders.pendingRecords``): the first such
name the vertex offers is read, and it gives the subtask's ``backlog`` (its growth over a window
from two readings). Sources that report none (Flink's DataGen) have no backlog.

Values are Flink's own: its time gauges average the last 60 s in 5 s slots and its record meters
the last 60 s, however short bpmon's window. ``busyTimeMsPerSecond`` is NaN for a legacy
``SourceFunction`` source, read here as unknown (None).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bpmon.model.errors import CollectorError
from bpmon.model.signals import SourceBacklog
from bpmon.model.values import Metrics

CANDIDATES: dict[str, tuple[str, ...]] = {
    "busy": ("busyTimeMsPerSecond",),
    "idle": ("idleTimeMsPerSecond",),
    "backpressured": ("backPressuredTimeMsPerSecond",),
    "soft": ("softBackPressuredTimeMsPerSecond",),
    "hard": ("hardBackPressuredTimeMsPerSecond",),
    "out_pool": ("Shuffle.Netty.Output.Buffers.outPoolUsage", "buffers.outPoolUsage"),
    "in_pool": ("Shuffle.Netty.Input.Buffers.inPoolUsage", "buffers.inPoolUsage"),
    "in_floating": (
        "Shuffle.Netty.Input.Buffers.inputFloatingBuffersUsage",
        "buffers.inputFloatingBuffersUsage",
    ),
    "in_exclusive": (
        "Shuffle.Netty.Input.Buffers.inputExclusiveBuffersUsage",
        "buffers.inputExclusiveBuffersUsage",
    ),
    "records_in": ("numRecordsInPerSecond",),
    "records_out": ("numRecordsOutPerSecond",),
    "busy_total": ("accumulateBusyTimeMs",),
    "idle_total": ("accumulateIdleTimeMs",),
    "backpressured_total": ("accumulateBackPressuredTimeMs",),
    "in_total": ("numRecordsIn",),
    "out_total": ("numRecordsOut",),
}
"""Each quantity bpmon reads, and Flink's names for it, newest first."""

PENDING_SUFFIX = ".pendingRecords"
"""FLIP-33's lag of a source, under its operator's name: quantity ``pending``."""

DEBLOATED = re.compile(r"Shuffle\.Netty\.Input\.(\d+)\.debloatedBufferSize")
"""With buffer debloating, each input gate's buffer size (Flink 1.14+, FLIP-183), listed per
gate (``0.Shuffle.Netty.Input.0.debloatedBufferSize``): quantity ``buffer_size``, the first
gate's."""

REQUIRED = ("busy", "idle", "backpressured")
"""Without these the cluster cannot be diagnosed (Flink older than 1.13)."""

MAX_QUERY_CHARS = 3500
"""Longest ``get=`` list in one request: Flink's REST server (Netty's HTTP decoder) refuses a
request line over 4,096 bytes with ``/bad-request`` (a vertex of parallelism 8 went over at 6,000);
3,500 leaves room for the path."""


@dataclass(frozen=True, slots=True)
class MetricNames:
    """The metric name this cluster uses for each quantity (absent: the cluster has none)."""

    names: Mapping[str, str]

    def ids(self, subtasks: Iterable[int]) -> list[str]:
        """Every ``"<subtask>.<metric>"`` id of the subtasks numbered ``subtasks``."""
        return [f"{i}.{name}" for i in subtasks for name in self.names.values()]


def resolve_names(available: Iterable[str], vertex: str, where: str) -> MetricNames:
    """Pick, for each quantity, the first candidate name the cluster offers.

    Args:
        available: metric ids listed by ``GET .../vertices/{vertex}/metrics`` (``"0.name"``).
        vertex: the vertex's name, for the error.
        where: the cluster (``Flink 1.12.7 at http://...``), for the error.

    Raises:
        CollectorError: the time accounting metrics are missing: the Flink version is too old.
    """
    offered = {i.split(".", 1)[1] for i in available if "." in i}
    names = {}
    for quantity, candidates in CANDIDATES.items():
        found = next((c for c in candidates if c in offered), None)
        if found is not None:
            names[quantity] = found
    pending = sorted(o for o in offered if o.endswith(PENDING_SUFFIX))
    if pending:
        names["pending"] = pending[0]
    gates = sorted((int(m[1]), o) for o in offered if (m := DEBLOATED.fullmatch(o)))
    if gates:
        names["buffer_size"] = gates[0][1]
    missing = [CANDIDATES[q][0] for q in REQUIRED if q not in names]
    if missing:
        raise CollectorError(
            f"{where} gives no {', '.join(missing)} for vertex {vertex!r}: these metrics exist "
            "since Flink 1.13; upgrade the cluster to Flink 1.13 or newer (bpmon reads 1.13 to 2.x)"
        )
    return MetricNames(names)


def query_chunks(ids: list[str]) -> list[str]:
    """The ``get=`` values to request ``ids`` in as few requests as fit :data:`MAX_QUERY_CHARS`."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for metric_id in ids:
        if current and size + len(metric_id) + 1 > MAX_QUERY_CHARS:
            chunks.append(",".join(current))
            current, size = [], 0
        current.append(metric_id)
        size += len(metric_id) + 1
    if current:
        chunks.append(",".join(current))
    return chunks


def values_of(answer: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """``[{"id": "0.x", "value": "1.5"}]`` as ``{"0.x": 1.5}``; NaN and non-numbers left out."""
    values = {}
    for item in answer:
        try:
            value = float(item["value"])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(value):
            values[str(item["id"])] = value
    return values


def subtask_metrics(values: Mapping[str, float], names: MetricNames, index: int) -> Metrics:
    """One subtask's Metrics from the values read (ratios are Flink's ms/s / 1000)."""

    def get(quantity: str) -> float | None:
        name = names.names.get(quantity)
        return None if name is None else values.get(f"{index}.{name}")

    def per_second(quantity: str) -> float | None:
        value = get(quantity)
        return None if value is None else value / 1000

    return Metrics(
        busy_ratio=per_second("busy"),
        idle_ratio=per_second("idle"),
        backpressured_time_ratio=per_second("backpressured"),
        out_pool_usage=get("out_pool"),
        in_pool_usage=get("in_pool"),
        records_in_per_s=get("records_in"),
        records_out_per_s=get("records_out"),
        soft_backpressured_ratio=per_second("soft"),
        hard_backpressured_ratio=per_second("hard"),
        backlog=SourceBacklog(get("pending"), None) if "pending" in names.names else None,
        buffer_size=get("buffer_size"),
    )


METER_SPAN_S = 60
"""Flink's record meters (``MeterView``) divide the last 60 s' count by 60, updated every 5 s."""


def young_rate(rate: float | None, running_s: float | None) -> float | None:
    """A record meter's rate corrected for a task younger than its 60 s span.

    Flink's ``MeterView`` divides by 60 s from the start, so a task running for 20 s reports a
    third of its real rate; what it counted is as of its last 5 s update. None: too young to
    tell (no update yet) or unknown.
    """
    if rate is None or running_s is None or running_s >= METER_SPAN_S + 5:
        return rate
    counted_s = (running_s // 5) * 5
    return rate * METER_SPAN_S / counted_s if counted_s > 0 else None


MIN_SPAN_MS = 500.0
"""The least task time two readings must span for their difference to be used."""

_TOTALS = ("busy_total", "idle_total", "backpressured_total")
SLIP_MS, SLIP_SHARE = 200.0, 0.05
"""How far a running total may step back between two readings (ms, or a share of the span they
cover, whichever is more) and still be read as no time spent; more is a reset (a restart)."""


def window_accounting(
    before: Mapping[str, float], after: Mapping[str, float], names: MetricNames, index: int
) -> Metrics | None:
    """A subtask's busy / idle / backpressured share, record rates and ``pendingRecords`` growth
    BETWEEN two readings, from Flink's running totals (``accumulateBusyTimeMs`` ...;
    ``numRecordsIn`` / ``Out``).

    Flink's ``...TimeMsPerSecond`` gauges average 5 s slots over up to a minute, and on Flink 2.3
    a lightly loaded subtask's gauge swings between 1000 and 0 ms/s while its totals grow by a
    steady 200 ms/s. The three totals add up to the task's running time, so their differences
    give exact shares over the span between the two metric fetches the readings come from,
    whenever those were. None when a total is missing or the readings span under
    :data:`MIN_SPAN_MS` (the same fetch): the caller keeps Flink's gauges.
    """

    def delta(quantity: str) -> float | None:
        name = names.names.get(quantity)
        key = f"{index}.{name}"
        if name is None or key not in before or key not in after:
            return None
        return after[key] - before[key]

    parts = [delta(q) for q in _TOTALS]
    if any(p is None for p in parts):
        return None
    whole = sum(max(0.0, p or 0.0) for p in parts)
    if any((p or 0.0) < -max(SLIP_MS, SLIP_SHARE * whole) for p in parts):
        return None
    # Flink derives a task's busy total as what its idle and backpressured totals leave of its
    # running time; a source held in hard backpressure has that remainder shrink a little while
    # the backpressured total catches up (367 -> 285 ms over a 5.6 s window was seen): a small
    # step back is no time at all
    busy, idle, backpressured = (max(0.0, p or 0.0) for p in parts)
    span = busy + idle + backpressured
    if span < MIN_SPAN_MS:
        return None
    records_in, records_out = delta("in_total"), delta("out_total")
    pending = delta("pending")
    backlog = None
    if "pending" in names.names:
        now = after.get(f"{index}.{names.names['pending']}")
        backlog = SourceBacklog(now, None if pending is None else pending * 1000 / span)
    return Metrics(
        busy_ratio=busy / span,
        idle_ratio=idle / span,
        backpressured_time_ratio=backpressured / span,
        records_in_per_s=None if records_in is None else records_in * 1000 / span,
        records_out_per_s=None if records_out is None else records_out * 1000 / span,
        accounting_span_ms=span,
        backlog=backlog,
    )


def pool_means(
    before: Mapping[str, float], after: Mapping[str, float], names: MetricNames, index: int
) -> tuple[float | None, float | None]:
    """A subtask's output and input pool usage as the mean of the two readings (the last one
    where the first is missing): a pool gauge is an instant, and a writer finishing a large
    record on overdraft buffers reads above 1 at one fetch and 1 at the next."""

    def mean(quantity: str) -> float | None:
        name = names.names.get(quantity)
        key = f"{index}.{name}"
        if name is None or key not in after:
            return None
        return (before[key] + after[key]) / 2 if key in before else after[key]

    return mean("out_pool"), mean("in_pool")


def soft_share(m: Metrics) -> float | None:
    """Of the time a task spent suspended in its mailbox, the share it was soft backpressured.

    A suspended task waits either for output buffers or for input, and its stack cannot tell
    which (:mod:`bpmon.collectors.flink.dumps`); its own time accounting can. The suspended
    time is what is neither busy nor hard backpressured: ``1000 - busy - hard`` ms/s. (A FLIP-27
    source's idle time overlaps its soft-backpressured time in Flink 2.3, so ``soft + idle`` can
    exceed 1000; the remainder of busy does not.) Without a busy time (legacy sources report
    NaN) it is ``soft + idle``. With the window's own totals (:func:`window_accounting`) the soft
    part is the backpressured time less Flink's hard-backpressured gauge. None when the task
    gives no soft-backpressured time.
    """
    soft = None if m.soft_backpressured_ratio is None else m.soft_backpressured_ratio * 1000
    hard = (m.hard_backpressured_ratio or 0.0) * 1000
    if m.accounting_span_ms is not None and m.backpressured_time_ratio is not None:
        # the window's own totals: soft = all backpressured time but the hard part
        hard = min(hard, m.backpressured_time_ratio * 1000)
        soft = m.backpressured_time_ratio * 1000 - hard
    if soft is None:
        return None
    if m.busy_ratio is not None:
        waiting = 1000 - m.busy_ratio * 1000 - hard
    elif m.idle_ratio is not None:
        waiting = soft + m.idle_ratio * 1000
    else:
        return None
    return min(1.0, soft / waiting) if waiting > 0 else None


FULL_POOL = 0.99
"""An output pool at least this full (its mean over the window) is out of buffers: a task
suspended beside it waits for buffers, not for input."""


@dataclass(frozen=True, slots=True)
class BlindShare:
    """The backpressured share of a subtask's suspended samples when its task thread is not the
    one working (a legacy source: busy time NaN), and what decided it."""

    share: float
    by: Literal["accounting", "pool", "flink"]
    value: float
    """Its backpressured time, its output pool's usage, or Flink's ratio for it (0..1)."""


def blind_share(m: Metrics, flink_ratio: float | None) -> BlindShare | None:
    """Where the samples cannot tell backpressure from idle and the busy time is missing.

    A legacy ``SourceFunction`` loops on a thread of its own: Flink's sampler sees only the
    task thread, waiting for mail (suspended) whether the source thread is blocked on buffers or
    not, and Flink gives the task no busy time (NaN). What the source thread did is then read,
    in this order, from: the backpressured time Flink did count for it (on 2.3 a DataStream
    legacy source read 1,000 ms/s hard backpressured over the window); a full output pool
    (:data:`FULL_POOL`: every buffer taken, so the source thread waits for one); Flink's own
    backpressure ratio for the subtask (SQL's datagen: times NaN, Flink's ratio 1.00). None when
    the task has a busy time (:func:`soft_share` decides) or nothing says backpressured.
    """
    if m.busy_ratio is not None:
        return None
    if m.backpressured_time_ratio is not None and m.backpressured_time_ratio > 0:
        ratio = m.backpressured_time_ratio
        return BlindShare(min(1.0, ratio), "accounting", ratio)
    if m.out_pool_usage is not None and m.out_pool_usage >= FULL_POOL:
        return BlindShare(1.0, "pool", m.out_pool_usage)
    if flink_ratio is not None and flink_ratio > 0:
        return BlindShare(min(1.0, flink_ratio), "flink", flink_ratio)
    return None


@dataclass(frozen=True, slots=True)
class FlinkLevel:
    """Flink's own verdict on a vertex (``GET .../backpressure``): level and ratio per subtask."""

    level: str | None
    ratios: Mapping[int, float]


def flink_level(answer: Mapping[str, Any]) -> FlinkLevel:
    """Parse the backpressure endpoint (both spellings of the level field; ``deprecated`` = none
    yet)."""
    if answer.get("status") != "ok":
        return FlinkLevel(None, {})
    level = answer.get("backpressureLevel") or answer.get("backpressure-level")
    ratios = {}
    for s in answer.get("subtasks") or []:
        try:
            ratios[int(s["subtask"])] = float(s["ratio"])
        except (KeyError, TypeError, ValueError):
            continue
    return FlinkLevel(str(level).upper() if level else None, ratios)
