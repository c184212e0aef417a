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

The same race crashes the process when another thread's stack is *walked*: reading
``frame.f_back`` makes a frame object for the caller, which may start a collection whose
finalizers give the GIL away; the owning thread then returns from that caller and frees the
memory ``f_back`` is still writing to (a segfault, seen once in 30 runs of the stress test). So
the sampler holds :func:`collection_paused` over the whole sample, the call and the walk of every
stack. Code outside bpmon that calls ``gc.enable()`` from another thread meanwhile reopens the
window; nothing in bpmon does.

Objects allocated meanwhile are collected at the next collection after the sample.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from types import FrameType

FrameSource = Callable[[], Mapping[int, FrameType]]
"""Returns ``{thread id: innermost frame}`` for every thread, as ``sys._current_frames``."""

NEEDS_GC_PAUSE = sys.implementation.name == "cpython" and sys.version_info < (3, 12)
"""Whether this interpreter has gh-106883 (CPython before 3.12)."""

_GC_LOCK = threading.RLock()
"""Held from disabling the collector to restoring it, by every caller of
:func:`collection_paused` (re-entrant: a paused frame source inside a paused sample)."""


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """The garbage collector disabled for the block, and restored as it was after.

    One process-wide lock covers the disable, the block and the restore, so concurrent callers
    never re-enable the collector under each other; a collector someone else disabled (or an
    enclosing block) stays disabled.
    """
    with _GC_LOCK:
        enabled = gc.isenabled()
        try:
            gc.disable()
            yield
        finally:
            if enabled:
                gc.enable()


def gc_paused(source: FrameSource) -> FrameSource:
    """``source`` called under :func:`collection_paused`."""

    def paused() -> Mapping[int, FrameType]:
        with collection_paused():
            return source()

    paused.__doc__ = f"{getattr(source, '__name__', 'the frame source')}, no collection meanwhile."
    return paused


current_frames: FrameSource = (
    gc_paused(sys._current_frames) if NEEDS_GC_PAUSE else sys._current_frames
)
"""``sys._current_frames``, with the collector paused for the call where gh-106883 can hang it:
the in-process sampler's default frame source."""
