"""Waiting on a condition instead of sleeping: the one way the tests wait for something to happen.

A sleep-then-assert always waits the worst case and still fails when a loaded machine makes the
worst case longer. ``wait_until`` polls the condition the test is waiting for at a short interval,
returns as soon as it holds, and gives up only after a generous timeout (CI runs the whole suite
on a loaded 2-core machine), failing with what it waited for and the last value it saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

WAIT_S = 60.0
"""The longest a test waits for something that takes well under a second unloaded."""
POLL_S = 0.02
"""How often a condition is polled: short next to anything a test waits for."""


def wait_until(
    check: Callable[[], T],
    what: str,
    timeout_s: float = WAIT_S,
    poll_s: float = POLL_S,
    *,
    until: Callable[[T], object] = bool,
) -> T:
    """Poll ``check`` until ``until`` of its value is true (by default: the value is truthy), and
    return that value.

    Fails the test after ``timeout_s`` with ``what`` (the condition, as "waiting for ...") and the
    last value ``check`` returned, so a failure says how far things got: to see figures there,
    let ``check`` read them and ``until`` judge them.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            pytest.fail(
                f"gave up waiting for {what} after {timeout_s:g} s (last seen: {_tail(value)})"
            )
        time.sleep(poll_s)


def _tail(value: object, keep: int = 2000) -> str:
    """``value``'s repr, cut to its last ``keep`` characters (a log's end says the most)."""
    shown = repr(value)
    return shown if len(shown) <= keep else "..." + shown[-keep:]
