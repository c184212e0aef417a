"""Builders of Observations shaped like what the runtime collectors produce for one window.

A subtask is described by the shares of its window (backpressured, busy, idle) as the stack
sampler would count them over 100 samples; the time accounting is the same picture shifted by a
small offset (real runs: within about 0.1 of the samples), so tests see two slightly different
views as they would in practice. Record rates and pool usages are passed explicitly.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bpmon.model.signals import SourceBacklog, Spill
from bpmon.model.values import (
    Edge,
    Metrics,
    Observation,
    Source,
    SubtaskWindow,
    TargetSettings,
    VertexObservation,
    Window,
)


def lag(growth: float) -> dict[str, Any]:
    """A source's further metrics: its ``pendingRecords`` grew by ``growth`` records/s."""
    return {"backlog": SourceBacklog(pending_records=None, growth_per_s=growth)}


def spilled(bytes_per_s: float) -> dict[str, Any]:
    """A subtask's further metrics: it spilled ``bytes_per_s`` to disk."""
    return {"spill": Spill(written_bytes_per_s=bytes_per_s)}


WINDOW = Window(
    start=datetime(2026, 11, 22, 10, 15, 2, tzinfo=UTC),
    end=datetime(2026, 11, 22, 10, 15, 7, tzinfo=UTC),
    samples=100,
    interval_ms=50.0,
    jitter_ms_p99=0.8,
)


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def sub(
    index: int,
    *,
    bp: float = 0.0,
    busy: float = 0.0,
    rin: float | None = None,
    rout: float | None = None,
    in_pool: float | None = None,
    out_pool: float | None = None,
    tm: int | None = None,
    samples: int = 100,
    timed: bool = True,
    drift: float = 0.03,
    metrics: Mapping[str, Any] | None = None,
) -> SubtaskWindow:
    """One subtask: ``bp`` and ``busy`` shares of its samples, idle the rest.

    ``timed=False`` gives what py-spy gives: samples only, no time accounting. ``drift`` moves
    the time accounting away from the samples (busy time lower, backpressured time higher).
    """
    n_bp = round(bp * samples)
    n_busy = round(busy * samples)
    n_idle = max(0, samples - n_bp - n_busy)
    t_bp = _clamp(bp + drift) if bp > 0 else 0.0
    t_busy = _clamp(busy - drift) if bp > 0 else _clamp(busy - drift / 2)
    t_idle = _clamp(1.0 - t_bp - t_busy)
    return SubtaskWindow(
        index=index,
        thread=f"t ({index + 1})",
        samples=samples,
        backpressured=n_bp,
        idle=n_idle,
        busy=n_busy,
        task_manager=tm,
        metrics=Metrics(
            busy_ratio=t_busy if timed else None,
            idle_ratio=t_idle if timed else None,
            backpressured_time_ratio=t_bp if timed else None,
            out_pool_usage=out_pool,
            in_pool_usage=in_pool,
            records_in_per_s=rin,
            records_out_per_s=rout,
            **dict(metrics or {}),
        ),
    )


def vertex(
    name: str,
    *subtasks: SubtaskWindow,
    inputs: tuple[Edge, ...] | list[Edge] = (),
    kind: str | None = None,
) -> VertexObservation:
    """A vertex from its subtasks (parallelism = their number)."""
    return VertexObservation(
        name=name,
        parallelism=len(subtasks),
        inputs=tuple(inputs),
        subtasks=tuple(subtasks),
        kind=kind,
    )


def edge(source: str, partitioner: str = "rebalance") -> Edge:
    """An input edge from ``source``."""
    return Edge(source=source, partitioner=partitioner)


def observation(
    *vertices: VertexObservation,
    job: str = "job",
    source: Source = "runtime",
    settings: TargetSettings | None = None,
) -> Observation:
    """An observation of one window."""
    return Observation(
        job=job,
        source=source,
        window=WINDOW,
        vertices=tuple(vertices),
        run_id=f"20261122T101500Z-{job}",
        settings=settings or TargetSettings(),
    )
