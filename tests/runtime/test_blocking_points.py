"""The runtime's waits and the shipped ``bpmon-runtime`` profile agree on where each wait lives.

Each place a task thread can wait is one named function (STYLE.md §6), and the profile matches
those functions by module path and name. A function that moves to another module, or is renamed,
would silently turn a backpressured or idle thread into a busy one; this test classifies the frame
each function really produces (``file:qualname``, as the stack sampler writes it) with the shipped
profile, so a move that forgets the profile fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

from bpmon.collectors.profile import StackClassifier, load_profile
from bpmon.runtime.local_pool import LocalBufferPool
from bpmon.runtime.pacing import ServiceTime
from bpmon.runtime.task import Task

COND_WAIT = "/usr/lib/python3.11/threading.py:Condition.wait"


def frame(function: Callable[..., object]) -> str:
    """The frame text the stack sampler records for a thread inside ``function``."""
    path = inspect.getsourcefile(function)
    assert path is not None
    return f"{path}:{function.__qualname__}"


@pytest.mark.parametrize(
    ("function", "state"),
    [
        (LocalBufferPool.request_buffer_builder_blocking, "backpressured"),
        (Task.wait_for_output, "backpressured"),
        (Task.wait_for_input, "idle"),
    ],
)
def test_each_wait_is_classified_by_its_real_frame(
    function: Callable[..., object], state: str
) -> None:
    classifier = StackClassifier(load_profile("bpmon-runtime"))
    main = frame(Task._main)
    assert classifier.classify([COND_WAIT, frame(function), main]) == state


def test_service_time_settled_inside_a_wait_is_work() -> None:
    classifier = StackClassifier(load_profile("bpmon-runtime"))
    stack = [frame(ServiceTime._serve), frame(ServiceTime.settle), frame(Task.wait_for_input)]
    assert classifier.classify([*stack, frame(Task._main)]) == "busy"
