"""Helpers of the server tests: tiny scenarios, waiting for a mechanism, a served app.

Jobs run on the real runtime; the tiny scenario samples ten times 10 ms apart, so a burst takes a
tenth of a second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from bpmon.service.watching import Watches
from bpmon.web.server import BpmonServer
from tests.runtime.jobs import task_threads
from tests.tiny import tiny
from tests.waiting import WAIT_S, wait_until

__all__ = ["TOKEN", "WAIT_S", "ServeFactory", "Served", "task_threads", "tiny", "wait_until"]

TOKEN = "a-test-token-0123456789abcdef"


@dataclass
class Served:
    """A server running on a thread: its URL, its registry, a client for it, and the server."""

    url: str
    watches: Watches
    client: httpx.Client
    server: BpmonServer
    thread: threading.Thread

    def stop(self) -> None:
        """Stop the server as a signal would, and wait until it has stopped."""
        self.client.close()
        self.server.should_exit = True
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the server did not stop"


ServeFactory = Callable[..., Served]
