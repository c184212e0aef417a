"""Every thread's current frame, read without deadlocking against the garbage collector.

``sys._current_frames()`` is how the in-process sampler sees all stacks at once. On CPython
before 3.12 it can hang the whole process for good (CPython gh-106883, fixed in 3.12, never in
3.11): it holds the runtime's HEAD lock while it makes a frame object per thread; making one can
start a garbage collection, whose finalizers run Python code, which gives the GIL away; the next
thread that takes the HEAD lock while holding the GIL (another sampler in the same call, a thread
starting or ending) then waits for the first, which waits for the GIL. ``bpmon serve`` watching
four jobs froze so after about two minutes.

The workaround CPython's maintainers suggested: no collection during the call.
:func:`gc_paused` disables the collector for the call and re-enables it only if it was enabled.
``gc.disable()`` is process-wide and several samplers run at once (one per watch), so one
process-wide lock covers the whole disable / call / restore: a sampler can never re-enable the
collector under another one still inside the call, nor read "disabled" from another sampler
and leave it off. The lock is held for the call alone (about 100 µs for a few dozen threads),
which the GIL and the HEAD lock serialise anyway, so samplers lose no parallelism to it.

Objects allocated meanwhile are collected at the next collection after the call. Code outside
bpmon that calls ``gc.enable()`` from another thread during the call reopens the window; nothing
in bpmon does.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Mapping
from types import FrameType

FrameSource = Callable[[], Mapping[int, FrameType]]
"""Returns ``{thread id: innermost frame}`` for every thread, as ``sys._current_frames``."""

NEEDS_GC_PAUSE = sys.implementation.name == "cpython" and sys.version_info < (3, 12)
"""Whether this interpreter has gh-106883 (CPython before 3.12)."""

_GC_LOCK = threading.Lock()
"""Held from disabling the collector to restoring it, by every caller of :func:`gc_paused`."""


def gc_paused(source: FrameSource) -> FrameSource:
    """``source`` called with the garbage collector disabled, and restored as it was after.

    One process-wide lock covers the disable, the call and the restore, so concurrent callers
    never re-enable the collector under each other; a collector someone else disabled stays
    disabled.
    """

    def paused() -> Mapping[int, FrameType]:
        with _GC_LOCK:
            enabled = gc.isenabled()
            try:
                gc.disable()
                return source()
            finally:
                if enabled:
                    gc.enable()

    paused.__doc__ = f"{getattr(source, '__name__', 'the frame source')}, no collection meanwhile."
    return paused


current_frames: FrameSource = (
    gc_paused(sys._current_frames) if NEEDS_GC_PAUSE else sys._current_frames
)
"""``sys._current_frames``, with the collector paused for the call where gh-106883 can hang it:
the in-process sampler's default frame source."""
