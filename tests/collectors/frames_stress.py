"""A process built to hit CPython gh-106883: stack samplers against the garbage collector.

On CPython 3.11, ``sys._current_frames()`` holds the runtime's HEAD lock while it makes a frame
object for every thread; making one can start a garbage collection, whose finalizers run Python
code, which gives the GIL away. The next thread to take the HEAD lock while it holds the GIL
(another sampler entering ``sys._current_frames()``, a thread starting or ending) waits for the
first, which waits for the GIL: the process hangs for good (fixed in 3.12, where a collection only
starts between two bytecodes).

This process makes every step likely at once: ``--workers`` threads that each leave a cyclic
object with a finalizer (a loop, so a collection runs Python code) from a fresh frame every time
(so ``sys._current_frames()`` has frame objects to make); ``--churners`` threads starting and
joining short threads all the time (the HEAD lock again); ``--samplers`` threads taking real
:class:`~bpmon.collectors.sampler.StackSampler` samples back to back; a low collection threshold
and a 0.2 ms switch interval (set once every thread runs), so collections and GIL hand-overs are
frequent. Tuned on a loaded two-core machine: with the bare ``sys._current_frames`` on Python
3.11.7, 10 runs of 10 hung within 1.6 s of ``ready``; the finalizers are kept cheap and one per
fresh frame, as heavier ones pile up garbage faster than collections (held off while one runs its
finalizers) can free it.

``--source raw`` gives the samplers the bare ``sys._current_frames``; ``--source bpmon`` leaves
the sampler's default frame source (:data:`bpmon.collectors.frames.current_frames`). The main
thread prints ``ready``, then ``beat SECONDS SAMPLES`` every 0.2 s for ``--seconds``, then
``stopping SECONDS SAMPLES`` every 0.2 s until every thread has stopped, then ``done SAMPLES
GC_ENABLED`` and exits 0. Hung samplers show as beats whose sample count stands still (the main
thread may go on beating while they wait), a hung process as no beat at all; whoever runs it
kills it.

    python tests/collectors/frames_stress.py --source raw --seconds 20
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
from collections.abc import Callable

from bpmon.collectors.profile import load_profile
from bpmon.collectors.sampler import StackSampler


class Garbage:
    """A self-referencing object with a finalizer: only a collection frees it, running code."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        total = 0
        for i in range(100):  # a loop: the interpreter may hand the GIL over in here
            total += i


def _leave_garbage() -> None:
    """A fresh frame each call, which leaves one cyclic object with a finalizer behind."""
    Garbage()
    time.sleep(0)


def _work(stop: threading.Event) -> None:
    while not stop.is_set():
        _leave_garbage()


def _churn(stop: threading.Event) -> None:
    """Threads starting and ending: each start and each end takes the HEAD lock."""
    while not stop.is_set():
        thread = threading.Thread(target=_leave_garbage, name="short-lived", daemon=True)
        thread.start()
        thread.join()


def _sample(sampler: StackSampler, stop: threading.Event, counts: list[int], i: int) -> None:
    while not stop.is_set():
        sampler.sample()
        counts[i] += 1


def main() -> None:
    """Start the threads, beat for ``--seconds``, stop them, say ``done``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("raw", "bpmon"), required=True)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=40)
    parser.add_argument("--churners", type=int, default=4)
    parser.add_argument("--samplers", type=int, default=4)
    parser.add_argument("--threshold", type=int, default=30, help="gc generation 0 threshold")
    parser.add_argument("--switch-ms", type=float, default=0.2, help="sys.setswitchinterval")
    args = parser.parse_args()
    profile = load_profile("python-queue")
    samplers = [
        StackSampler(profile, sys._current_frames)
        if args.source == "raw"
        else StackSampler(profile)
        for _ in range(args.samplers)
    ]
    stop = threading.Event()
    counts = [0] * args.samplers
    threads = [threading.Thread(target=_work, args=(stop,)) for _ in range(args.workers)]
    threads += [threading.Thread(target=_churn, args=(stop,)) for _ in range(args.churners)]
    threads += [
        threading.Thread(target=_sample, args=(s, stop, counts, i)) for i, s in enumerate(samplers)
    ]
    for thread in threads:
        thread.daemon = True
        thread.start()
    gc.set_threshold(args.threshold, 10, 10)
    sys.setswitchinterval(args.switch_ms / 1000)
    print("ready", flush=True)
    started = time.monotonic()
    _beat_while("beat", lambda: time.monotonic() - started < args.seconds, started, counts)
    stop.set()
    _beat_while("stopping", lambda: any(t.is_alive() for t in threads), started, counts)
    print(f"done {sum(counts)} {gc.isenabled()}", flush=True)


def _beat_while(word: str, going: Callable[[], bool], started: float, counts: list[int]) -> None:
    """Print ``word SECONDS SAMPLES`` every 0.2 s while ``going()``."""
    while going():
        print(f"{word} {time.monotonic() - started:.1f} {sum(counts)}", flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    main()
