"""What bpmon can watch: the :class:`Target` protocol, and the :class:`Sampler` both stack
samplers follow.

A target is bpmon's own runtime running a scenario, another Python process read with py-spy, or
(later) a Flink cluster read over REST. The service drives every one of them with the same loop:
``start``, ``observe`` a burst, ``snapshot`` for a live view, ``wait``, ``stop``. Nothing above
the collectors knows which one it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bpmon.collectors.sampler import Progress, StackBurst, StopSignal
from bpmon.model.values import Observation, Source


class Sampler(Protocol):
    """A source of stack bursts: in-process (``sys._current_frames``) or py-spy."""

    def burst(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> StackBurst:
        """Take ``samples`` samples of every thread, ``interval_ms`` apart."""
        ...


@dataclass(frozen=True, slots=True)
class Ending:
    """How a target's watch ended: what leaked (bpmon's runtime only) and any failure."""

    leaks: tuple[str, ...] = ()
    error: str | None = None


class Target(Protocol):
    """Something bpmon watches, one window at a time."""

    @property
    def job(self) -> str:
        """The job's name, as reports carry it."""
        ...

    @property
    def source(self) -> Source:
        """What kind of target this is (``runtime``, ``pyspy``, ``flink``)."""
        ...

    def start(self) -> None:
        """Begin watching (bpmon's runtime starts the job's threads here)."""
        ...

    def observe(
        self,
        samples: int,
        interval_ms: float,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        """One window: a burst of stack samples and the metrics over the same window.

        Raises the errors of :meth:`wait` in the same cases: a window that could not be read
        because the target is unavailable for now raises
        :class:`~bpmon.model.errors.UnavailableError` rather than giving a half-read observation.
        """
        ...

    def snapshot(self) -> Observation | None:
        """The metrics right now, without stack samples, for a live view (None: none to give)."""
        ...

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` pass, then say how the job is.

        Raises:
            JobError: the job failed (the watch ends ``failed``).
            JobOverError: the job ended by itself (the watch ends ``ended``).
            UnavailableError: the job cannot be read for now (restarting, a timeout, HTTP 5xx):
                the watch waits and tries again.
        """
        ...

    def stop(self) -> Ending:
        """Stop watching (idempotent); bpmon's runtime stops every thread here."""
        ...
