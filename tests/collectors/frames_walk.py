"""Count the garbage collections that start inside a sampler's stack walk, bare and paused.

Run by ``test_frames.py`` in a child process: with a collection due at every allocation and 20
parked threads to walk, a sampler given the bare ``sys._current_frames`` collects inside its walk
(each ``f_back`` makes a frame object), the default one never does. Prints ``bare N`` and
``paused N``.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Mapping
from types import FrameType

from bpmon.collectors.profile import load_profile
from bpmon.collectors.sampler import StackSampler


def _in_sample_body() -> bool:
    """Whether the calling thread is inside a sampler's sample body (frames call or walk)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename.endswith("sampler.py") and code.co_name in ("_sample", "_read"):
            return True
        frame = frame.f_back
    return False


def collections_during_samples(sampler: StackSampler) -> int:
    """Collections that start inside ``sampler``'s 5 samples, with one due at every object."""
    counted = [0]

    def seen(phase: str, info: Mapping[str, int]) -> None:
        if phase == "start" and _in_sample_body():
            counted[0] += 1

    threshold = gc.get_threshold()
    gc.callbacks.append(seen)
    gc.set_threshold(1)
    try:
        for _ in range(5):
            sampler.sample()
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(seen)
    return counted[0]


def parked(n: int) -> tuple[threading.Event, list[threading.Thread]]:
    """``n`` threads blocked in a fresh call each; set the event to let them end."""
    release = threading.Event()
    threads = [threading.Thread(target=release.wait, daemon=True) for _ in range(n)]
    for thread in threads:
        thread.start()
    return release, threads


def main() -> None:
    """Print the collections inside the bare and the paused samplers' walks."""
    profile = load_profile("python-queue")
    for label, sampler in (
        ("bare", StackSampler(profile, sys._current_frames)),
        ("paused", StackSampler(profile)),
    ):
        release, threads = parked(20)
        print(label, collections_during_samples(sampler), flush=True)
        release.set()
        for thread in threads:
            thread.join(timeout=5)


if __name__ == "__main__":
    main()
