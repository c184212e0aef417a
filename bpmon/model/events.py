"""The events of a watch, as the service hands them to every surface.

:func:`bpmon.service.facade.watch` yields these, in this order: one :class:`JobStarted`; while the
job runs, :class:`LiveSnapshot` about four times a second (a bare heartbeat about once a second when
nobody watches live); per burst one :class:`BurstSampled` then one :class:`ReportReady`, or a
:class:`Trouble` when the burst could not be taken; last one :class:`JobEnded` or
:class:`JobFailed`. The CLI's live view, the server's event stream and the dashboard all read the
same values. Model layer: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bpmon.model.values import Observation, Report, Source, VertexStatus


@dataclass(frozen=True, slots=True)
class JobStarted:
    """The target is running (bpmon's runtime started the job) and the run has its id."""

    run_id: str
    job: str
    source: Source
    bursts: int | None
    duration_s: float | None


@dataclass(frozen=True, slots=True)
class SamplingProgress:
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
            ``sampling``, ``waiting`` (between bursts), ``unavailable`` (waiting to try again)
            or ``running``.
        vertices: per vertex and subtask, totalled as in a report; empty for a target that
            gives no metrics between bursts (py-spy), and when nobody watches live (a
            heartbeat).
        sampling: the burst in progress, when one is.
    """

    elapsed_s: float
    phase: str
    vertices: tuple[VertexStatus, ...]
    sampling: SamplingProgress | None = None


@dataclass(frozen=True, slots=True)
class BurstSampled:
    """Burst ``burst`` (0-based) was sampled: its observation, before the diagnosis."""

    run_id: str
    burst: int
    observation: Observation


@dataclass(frozen=True, slots=True)
class ReportReady:
    """Burst ``burst`` was diagnosed and its report saved at ``path``.

    ``path`` is None when saving failed (``save_error`` says why): the report is still handed
    out, so a diagnosis is never lost with its file.
    """

    run_id: str
    burst: int
    report: Report
    path: Path | None
    save_error: str | None = None


TroubleKind = Literal["unavailable", "overrun"]


@dataclass(frozen=True, slots=True)
class Trouble:
    """Something went wrong that the watch rides out (it goes on).

    ``unavailable``: the target could not be read for now (it is tried again); ``overrun``: a
    burst ran far past its plan and was abandoned. (A report that could not be saved is said on
    its :class:`ReportReady`.)
    """

    run_id: str
    burst: int
    kind: TroubleKind
    detail: str


@dataclass(frozen=True, slots=True)
class JobEnded:
    """The watch is over and the target stopped.

    Attributes:
        run_id: the run.
        reports: every report of a watch with a planned number of bursts; empty for a watch
            until stopped, which keeps none (they went to disk and to the subscribers).
        paths: the files of ``reports`` that were saved.
        leaks: what did not end cleanly.
        bursts: how many bursts were diagnosed.
        reason: how the job ended when it ended by itself (finished, cancelled, exited).
        save_errors: why reports could not be saved, one line each (the first ten).
        unsaved: how many reports could not be saved.
    """

    run_id: str
    reports: tuple[Report, ...]
    paths: tuple[Path, ...]
    leaks: tuple[str, ...]
    bursts: int = 0
    reason: str | None = None
    save_errors: tuple[str, ...] = ()
    unsaved: int = 0


@dataclass(frozen=True, slots=True)
class JobFailed(JobEnded):
    """The job failed (a task raised); the reports of the bursts before it are kept."""

    error: str = ""


WatchEvent = JobStarted | LiveSnapshot | BurstSampled | ReportReady | Trouble | JobEnded
"""Anything :func:`bpmon.service.facade.watch` yields (:class:`JobFailed` is a
:class:`JobEnded`)."""
