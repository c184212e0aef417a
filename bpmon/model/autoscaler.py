"""The autoscaler's second opinion in a report: what Flink's Kubernetes autoscaler would decide
from the same window, and how that compares with bpmon's root causes (``docs/report.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

VerdictKind = Literal[
    "agrees",
    "scales-ineffectively",
    "scales-wrong-vertex",
    "scales-down-bottleneck",
    "misses",
    "over-provisions",
]
VERDICT_KINDS: tuple[VerdictKind, ...] = get_args(VerdictKind)
"""Every verdict on the autoscaler's decision (docs/report.md says what each means)."""


@dataclass(frozen=True, slots=True)
class AutoscalerVertex:
    """One vertex as the autoscaler evaluates it.

    Attributes:
        load: its busy share, aggregated over its subtasks (MAX by default); None unknown.
        true_processing_rate: records/s it could take at 100% busy (None: unbounded, no input).
        target_rate: the records/s it is to take (arrival, carried from the sources).
        catch_up_rate: the records/s more it is to take to drain the sources' lag in time.
        parallelism: its subtasks now.
        recommended_parallelism: what the autoscaler would give it (its parallelism when it
            would not scale at all).
        outside: its processing rate is outside the utilisation bounds (a scaling trigger).
        delayed: a scale-down, applied only after ``scale-down.interval``.
    """

    name: str
    load: float | None
    true_processing_rate: float | None
    target_rate: float
    catch_up_rate: float
    parallelism: int
    recommended_parallelism: int
    outside: bool = False
    delayed: bool = False


@dataclass(frozen=True, slots=True)
class AutoscalerVerdict:
    """The autoscaler's decision at one vertex, judged against bpmon's diagnosis."""

    vertex: str
    verdict: VerdictKind
    detail: str


@dataclass(frozen=True, slots=True)
class AutoscalerReport:
    """A report's ``autoscaler``: the configuration used, every vertex, the verdicts, and
    whether it would scale at all (``acts``)."""

    config: dict[str, object]
    vertices: tuple[AutoscalerVertex, ...]
    verdicts: tuple[AutoscalerVerdict, ...]
    acts: bool = False
