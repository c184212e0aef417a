"""Helpers of the server tests: tiny scenarios, waiting for a mechanism, a served app.

Jobs run on the real runtime; the tiny scenario samples ten times 10 ms apart, so a burst takes a
tenth of a second.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from bpmon.service.watching import Watches
from bpmon.web.server import BpmonServer

TINY = """
name = "{name}"
duration_s = 5

[monitor]
warmup_s = 0
samples = 10
interval_ms = 10
settle_s = 0

[[operators]]
name = "src"
kind = "source"
parallelism = 2
rate = 200

[[operators]]
name = "out"
kind = "sink"
cost_us = 50
inputs = [{{ from = "src", partitioner = "rebalance" }}]
"""
TOKEN = "a-test-token-0123456789abcdef"
WAIT_S = 60.0
"""The longest a test waits for something that takes well under a second unloaded."""


def tiny(name: str = "tiny") -> str:
    """The text of a tiny scenario whose job is called ``name``."""
    return TINY.format(name=name)


def task_threads() -> list[str]:
    """The runtime's task threads still alive (``"src (1/2)"``...)."""
    return [t.name for t in threading.enumerate() if re.fullmatch(r".+ \(\d+/\d+\)", t.name)]


def wait_until(check: Callable[[], object], what: str, timeout: float = WAIT_S) -> object:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"gave up waiting for {what}")


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
