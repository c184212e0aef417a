"""Fan-out of a job's notices to its readers (the server's event streams), never blocking a watch.

A watch thread calls :meth:`Subscribers.notify`; every :class:`Subscription` of that job gets the
notice in a bounded queue and its ``wake`` callback is called, so a reader waiting elsewhere (on
an asyncio loop, say) learns of it without a thread of its own. A reader that falls behind loses
the oldest notices, counted in ``dropped``: a slow client never holds a watch up. When the server
stops, :meth:`Subscribers.close` ends every subscription, and later ones start closed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from bpmon.model.values import Report

SUBSCRIBER_LIMIT = 64
"""Notices a subscriber may fall behind by before the oldest are dropped."""


@dataclass(frozen=True, slots=True)
class Notice:
    """What a subscriber of a job is told: a new report (``report``), or the watch ended."""

    job: str
    state: str
    run_id: str
    burst: int | None = None
    report: Report | None = None


class Subscription:
    """One reader of a job's notices: a bounded queue filled by watch threads.

    ``wake`` is called (from a watch thread) after every push and on close; it must be
    thread-safe and must not block. When the reader falls ``limit`` notices behind, the oldest
    is dropped and counted in ``dropped``.
    """

    def __init__(self, job: str, wake: Callable[[], None], limit: int = SUBSCRIBER_LIMIT) -> None:
        self.job = job
        self.dropped = 0
        self.closed = False
        self._wake = wake
        self._items: deque[Notice] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def push(self, notice: Notice) -> None:
        """Queue ``notice`` for the reader and wake it."""
        with self._lock:
            if len(self._items) == self._items.maxlen:
                self.dropped += 1
            self._items.append(notice)
        self._wake()

    def take(self) -> list[Notice]:
        """Every notice queued so far, oldest first (empty when none)."""
        with self._lock:
            items = list(self._items)
            self._items.clear()
        return items

    def close(self) -> None:
        """No more notices will come (the server stops): wake the reader to end its stream."""
        self.closed = True
        self._wake()


class Subscribers:
    """Every subscription, by job; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers: dict[str, list[Subscription]] = {}
        self._closed = False

    def subscribe(self, job: str, wake: Callable[[], None]) -> Subscription:
        """A new reader of ``job``'s notices (closed at once after :meth:`close`)."""
        reader = Subscription(job, wake)
        with self._lock:
            closed = self._closed
            if not closed:
                self._readers.setdefault(job, []).append(reader)
        if closed:
            reader.close()
        return reader

    def unsubscribe(self, reader: Subscription) -> None:
        """Forget ``reader`` (its stream ended)."""
        with self._lock:
            group = self._readers.get(reader.job, [])
            if reader in group:
                group.remove(reader)

    def notify(self, notice: Notice) -> None:
        """Hand ``notice`` to every reader of its job."""
        with self._lock:
            readers = list(self._readers.get(notice.job, ()))
        for reader in readers:
            reader.push(notice)

    def close(self) -> None:
        """End every subscription; later ones start closed."""
        with self._lock:
            self._closed = True
            readers = [r for group in self._readers.values() for r in group]
        for reader in readers:
            reader.close()
