"""Injected failures: the runtime side of a scenario operator's ``fail`` key.

A scenario job runs no user code, so a test (or a demo) that needs a failing task cannot write a
buggy operator. ``fail = { after_records = N }`` or ``fail = { after_s = S }`` makes chosen
subtasks raise a plain ``RuntimeError`` in their own thread at that point, from inside the task
loop, so the job fails exactly as it would if a user's operator raised: the task records the
error, the job is told, and stopping it gives every buffer back.
"""

from __future__ import annotations

from collections.abc import Callable

from bpmon.scenario import FailSpec


class InjectedFault:
    """One subtask's armed failure; owned by its task thread (not thread-safe).

    The task asks :meth:`allow` before it processes (or, a source, emits) a chunk of records and
    processes only as many as it is allowed, so ``after_records = N`` fails after exactly ``N``
    records; it calls :meth:`check` at every turn of its loop, so ``after_s`` fires even while
    the subtask has nothing to process.
    """

    def __init__(self, spec: FailSpec, name: str, now: Callable[[], float]) -> None:
        """Arm ``spec`` for the subtask called ``name``; seconds count from :meth:`start`."""
        self._spec = spec
        self._name = name
        self._now = now
        self._deadline: float | None = None
        self._left = spec.after_records

    @classmethod
    def of(
        cls, spec: FailSpec | None, index: int, name: str, now: Callable[[], float]
    ) -> InjectedFault | None:
        """The fault of subtask ``index``, or None when its operator's ``fail`` spares it."""
        if spec is None or not spec.applies_to(index):
            return None
        return cls(spec, name, now)

    def start(self) -> None:
        """The subtask's thread starts now: ``after_s`` counts from here."""
        if self._spec.after_s is not None:
            self._deadline = self._now() + self._spec.after_s

    def check(self) -> None:
        """Raise if the failure is due now (``after_s`` passed, or no records left)."""
        if self._left is not None and self._left <= 0:
            raise RuntimeError(
                f"injected failure: {self._name} processed {self._spec.after_records} records "
                f"(scenario key fail.after_records)"
            )
        if self._deadline is not None and self._now() >= self._deadline:
            raise RuntimeError(
                f"injected failure: {self._name} ran {self._spec.after_s:g} s "
                f"(scenario key fail.after_s)"
            )

    def allow(self, count: int) -> int:
        """How many of ``count`` records the subtask may process now (they count as processed).

        Raises when the failure is due before the first of them.
        """
        self.check()
        if self._left is None:
            return count
        granted = min(count, self._left)
        self._left -= granted
        return granted
