"""The bursts a watch could not take, and what its next report says about them.

Two ways a long watch goes wrong are handled without ending it (:mod:`bpmon.service.loop` meets
them, :class:`Setbacks` keeps count):

- **a burst that overruns its plan** several times over (a stuck py-spy, a JobManager that
  takes minutes to answer) is abandoned: :class:`BurstOverrunError` says so, the watch reports
  it and goes on;
- **a target that is unavailable for now** (:class:`~bpmon.model.errors.UnavailableError`: a
  timeout, an HTTP 5xx, a Flink job restarting) is tried again with backoff: :class:`Setbacks`
  counts the tries, says how long to wait, and turns the gap into a ``gap`` finding on the next
  report; a watch with a patience gives up once the gap is longer.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from bpmon.model.errors import UnavailableError
from bpmon.model.values import Finding

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
"""An unavailable target is tried again after 1 s, 2 s, 4 s, ... at most every 30 s."""
REASONS_KEPT = 3
"""The different reasons a gap finding names (the tries for others are counted)."""
_FIGURES = re.compile(r"\d+(?:[.,]\d+)*")


class BurstOverrunError(Exception):
    """A burst ran far past its plan and was abandoned (the message says how far)."""


class Setbacks:
    """The bursts a watch could not take, and what its next report says about them.

    Whatever the length of a gap (a JobManager down for a day), what is kept is bounded: the
    number of tries, the first :data:`REASONS_KEPT` different reasons (told apart by their
    words, not their figures: "4 times in 1.7 s" and "4 times in 1.9 s" are one reason, shown
    as last seen) and how many bursts were abandoned, with the last one's text.

    Args:
        job: the job the findings name.
        patience_s: how long the target may stay unreadable before the watch gives up (None:
            for ever, a watch until stopped).
        clock: monotonic seconds.
    """

    def __init__(
        self, job: str, patience_s: float | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.job, self.patience_s, self._clock = job, patience_s, clock
        self._since: float | None = None
        self._tries = 0
        self._reasons: dict[str, str] = {}
        self._other_reasons = 0
        self._overruns = 0
        self._last_overrun = ""

    def unavailable(self, exc: UnavailableError) -> float:
        """A burst could not be read: the seconds to wait before the next try.

        Raises:
            UnavailableError: ``exc`` itself, once the gap is longer than the patience.
        """
        self._tried()
        key = _FIGURES.sub("#", str(exc))
        if key in self._reasons or len(self._reasons) < REASONS_KEPT:
            self._reasons[key] = str(exc)
        elif key not in self._reasons:
            self._other_reasons += 1
        if self._out_of_patience():
            raise exc
        return float(min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2.0 ** min(self._tries - 1, 30)))

    def overran(self, exc: BurstOverrunError) -> None:
        """A burst was abandoned: its next report says so (and the gap goes on).

        Raises:
            UnavailableError: the gap is longer than the patience.
        """
        self._tried()
        self._overruns += 1
        self._last_overrun = str(exc)
        if self._out_of_patience():
            raise UnavailableError(f"no burst could be taken for {self.patience_s:g} s: {exc}")

    def _tried(self) -> None:
        if self._since is None:
            self._since = self._clock()
        self._tries += 1

    def _out_of_patience(self) -> bool:
        assert self._since is not None
        return self.patience_s is not None and self._clock() - self._since > self.patience_s

    def findings(self) -> tuple[Finding, ...]:
        """What the next report must say about the bursts missed since the last one; resets."""
        notes = []
        if self._overruns:
            before = f"{self._overruns} bursts abandoned; the last: " if self._overruns > 1 else ""
            notes.append(Finding("overrun", self.job, before + self._last_overrun))
        if self._since is not None and self._reasons:
            gap_s = self._clock() - self._since
            reasons = "; then ".join(self._reasons.values())
            others = self._other_reasons
            more = f" (and {others} tries for other reasons)" if others else ""
            notes.append(
                Finding(
                    "gap",
                    self.job,
                    f"no window for {gap_s:.0f} s before this one ({self._tries} tries): "
                    f"{reasons}{more}",
                )
            )
        self._since, self._tries, self._reasons = None, 0, {}
        self._other_reasons, self._overruns, self._last_overrun = 0, 0, ""
        return tuple(notes)
