"""The events of a watch, as the service hands them to every surface.

:func:`bpmon.service.watch` yields these, in this order: one :class:`JobStarted`; while the job
runs, :class:`LiveSnapshot` about four times a second; per burst one :class:`BurstSampled` then
one :class:`ReportReady`; last one :class:`JobEnded` or :class:`JobFailed`. The CLI's live view,
the server's event stream and the dashboard all read the same values. Model layer: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bpmon.model import Observation, Report, Source, VertexStatus


@dataclass(frozen=True, slots=True)
class JobStarted:
    """The target is running (bpmon's runtime started the job) and the run has its id."""

    run_id: str
    job: str
    source: Source
    bursts: int | None
    duration_s: float | None


@dataclass(frozen=True, slots=True)
class Sampling:
    """How far the burst in progress got: ``done`` of ``samples`` samples of burst ``burst``."""

    burst: int
    done: int
    samples: int


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """Every vertex's metrics right now, with levels from the time accounting.

    Attributes:
        elapsed_s: seconds since the watch began.
        phase: ``warming up``, ``settling`` (after the warm-up, while backpressure still builds),
            ``sampling``, ``waiting`` (between bursts) or ``running``.
        vertices: per vertex and subtask, totalled as in a report; empty for a target that
            gives no metrics between bursts (py-spy).
        sampling: the burst in progress, when one is.
    """

    elapsed_s: float
    phase: str
    vertices: tuple[VertexStatus, ...]
    sampling: Sampling | None = None


@dataclass(frozen=True, slots=True)
class BurstSampled:
    """Burst ``burst`` (0-based) was sampled: its observation, before the diagnosis."""

    run_id: str
    burst: int
    observation: Observation


@dataclass(frozen=True, slots=True)
class ReportReady:
    """Burst ``burst`` was diagnosed and its report saved at ``path``."""

    run_id: str
    burst: int
    report: Report
    path: Path


@dataclass(frozen=True, slots=True)
class JobEnded:
    """The watch is over and the target stopped; ``leaks`` lists what did not end cleanly."""

    run_id: str
    reports: tuple[Report, ...]
    paths: tuple[Path, ...]
    leaks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class JobFailed(JobEnded):
    """The job failed (a task raised); the reports of the bursts before it are kept."""

    error: str = ""


Event = JobStarted | LiveSnapshot | BurstSampled | ReportReady | JobEnded
"""Anything :func:`bpmon.service.watch` yields (:class:`JobFailed` is a :class:`JobEnded`)."""
