"""Time, made in one place: the wall clock of reports and run ids, and a monotonic clock that
tells the time and sleeps.

:func:`utc_now` is the wall clock every window, report and run id is stamped with (injected as a
``Callable[[], datetime]`` where it is read). A naive datetime is taken as UTC everywhere
(:func:`as_utc`), never as the machine's local time, and every surface writes a moment as
:func:`format_timestamp` does. For intervals:

Everything in the runtime that reads the time or waits takes a ``now`` callable (and a ``sleep``
callable where it waits) instead of calling :mod:`time` itself, so tests drive it with a
:class:`ManualClock` deterministically and production uses :class:`SystemClock`. Both satisfy the
:class:`Clock` protocol; pass ``clock.now`` and ``clock.sleep`` where a callable is asked for.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


def utc_now() -> datetime:
    """The current time in UTC, aware."""
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC, aware; a naive datetime is taken as UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def format_timestamp(moment: datetime) -> str:
    """``2026-11-22T10:15:02.000Z``: UTC, milliseconds (the report's JSON, the dashboard's
    figures and the browser's clock read it)."""
    return as_utc(moment).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


class Clock(Protocol):
    """A monotonic clock in seconds that can also sleep."""

    def now(self) -> float:
        """Return the current time in seconds (monotonic, arbitrary origin)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; the time passed counts in :meth:`now`."""
        ...


class SystemClock:
    """The real clock: :func:`time.monotonic` and :func:`time.sleep`."""

    now = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)


class ManualClock:
    """A clock for tests: time moves only when :meth:`advance` or :meth:`sleep` is called.

    It also counts how long and how often it was slept, so a test can check what a component
    waited without patching anything. Not thread-safe; use it from the test's thread.
    """

    def __init__(self, start: float = 0.0) -> None:
        """Start the clock at ``start`` seconds."""
        self._now = start
        self.slept = 0.0
        """Total seconds passed in :meth:`sleep`."""
        self.sleeps = 0
        """Number of :meth:`sleep` calls."""

    def now(self) -> float:
        """Return the current manual time."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (which must not be negative)."""
        if seconds < 0:
            raise ValueError(f"ManualClock.advance: seconds must be >= 0, got {seconds}")
        self._now += seconds

    def sleep(self, seconds: float) -> None:
        """Sleep by advancing time by ``seconds``, like :func:`time.sleep` rejects negatives."""
        if seconds < 0:
            raise ValueError(f"ManualClock.sleep: seconds must be >= 0, got {seconds}")
        self._now += seconds
        self.slept += seconds
        self.sleeps += 1
