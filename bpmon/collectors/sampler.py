"""The in-process stack sampler, and the burst every stack collector produces.

A *burst* is Flink's stack-sampling window: ``samples`` samples, ``interval_ms`` apart; each
sample reads the stacks of all threads at once and classifies every thread's stack with a
collector profile (backpressured / idle / busy). Sample ``k`` is due at the ABSOLUTE deadline
``start + k x interval``, so a late wake-up delays one sample and never shifts the rest: the burst
does not drift. How late each sample was is recorded; the burst reports its 99th percentile.

:func:`record_burst` runs the schedule for any source of samples (this module's in-process
:class:`StackSampler`, or ``pyspy.PySpySampler`` for another process).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import CodeType, FrameType, MappingProxyType
from typing import NamedTuple, Protocol

from bpmon.collectors.frames import NEEDS_GC_PAUSE, FrameSource, collection_paused, current_frames
from bpmon.collectors.profile import Profile, StackClassifier
from bpmon.model.clock import utc_now
from bpmon.model.values import SampleState

ThreadState = tuple[int, str, SampleState, bool]
"""One thread in one sample: (thread id, thread name, state, seen on the data path)."""

Progress = Callable[[int, int], None]
"""Called after every sample with (samples done, samples planned)."""

_CACHE_LIMIT = 50_000

_Reading = tuple[SampleState, bool, int]
"""What one stack was read as: its state, whether it shows the thread on the data path, and the
chain position it is at (the profile's ``chain_hop`` frames on it)."""

ChainDepths = Mapping[int, int]
"""Per thread id, the chain position of its stack in one sample, for busy threads of a profile
with a ``chain_hop`` (threads not listed: no position read)."""


class StopSignal(Protocol):
    """Anything with ``is_set()`` (a ``threading.Event``): a burst ends early once it is set."""

    def is_set(self) -> bool:
        """Whether the burst must stop."""
        ...


class Snapshot(NamedTuple):
    """One sample: when the stacks were read (monotonic seconds), every thread's state, and the
    chain position of every busy thread (when the profile reads chains)."""

    at: float
    threads: Iterable[ThreadState]
    chain: ChainDepths = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ThreadCounts:
    """How one thread's samples of a burst were classified.

    ``data_path``: whether any of its samples showed it on the data path (see
    :meth:`~bpmon.collectors.profile.StackClassifier.read`). ``chain``: its busy samples by
    chain position (index 0: the chain's head), empty when the profile reads no chains.
    """

    name: str
    ident: int
    backpressured: int = 0
    idle: int = 0
    busy: int = 0
    data_path: bool = True
    chain: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        """Samples in which the thread was seen (fewer than the burst's if it started late)."""
        return self.backpressured + self.idle + self.busy


@dataclass(frozen=True, slots=True)
class StackBurst:
    """One window of stack samples, classified per thread.

    Attributes:
        start: when the first sample was due (UTC).
        end: when the window closed, ``samples x interval`` after ``start`` when on time (UTC).
        samples: samples actually taken (fewer when stopped early or samples were missed).
        interval_ms: the achieved delay between two samples: the mean gap between the first and
            the last sample taken (the planned one when fewer than two were taken).
        jitter_ms_p99: 99th percentile of the samples' lateness against their absolute deadlines,
            less the smallest lateness (a constant offset, such as py-spy's attach time, is not
            jitter); ``None`` when no sample was taken.
        threads: per-thread counts, ordered by thread name.
        missed: samples the collector could not read (py-spy errors); not in ``samples``.
        planned_samples: the samples asked for.
        planned_interval_ms: the delay asked for between two samples.
    """

    start: datetime
    end: datetime
    samples: int
    interval_ms: float
    jitter_ms_p99: float | None
    threads: tuple[ThreadCounts, ...]
    missed: int = 0
    planned_samples: int | None = None
    planned_interval_ms: float | None = None

    def thread(self, name: str) -> ThreadCounts:
        """The counts of the (first) thread called ``name``; KeyError if none was seen."""
        for counts in self.threads:
            if counts.name == name:
                return counts
        raise KeyError(name)


def running_thread_names() -> dict[int, str]:
    """``{thread id: name}`` of the threads the ``threading`` module knows."""
    return {t.ident: t.name for t in threading.enumerate() if t.ident is not None}


def record_burst(
    take: Callable[[], Snapshot | None],
    samples: int,
    interval_ms: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    wall_clock: Callable[[], datetime] = utc_now,
    progress: Progress | None = None,
    stop: StopSignal | None = None,
    dither: float = 0.0,
) -> StackBurst:
    """Call ``take`` at ``samples`` absolute deadlines ``interval_ms`` apart and tally the result.

    ``take`` returns a :class:`Snapshot`, or None when the target could not be read this time (a
    missed sample). The window stays open until the last interval has passed.

    ``dither`` (0 to < 1) moves each deadline after the first later by a random share of up to
    that much of an interval. A target whose work repeats with a period that divides the
    interval (bpmon's runtime paces its chained operators exactly: a 2 ms cycle fits ten times
    in 20 ms) would otherwise be seen at the same phase sample after sample, and which chained
    operator is on the stack would depend on that phase, not on its share of the time.

    Raises:
        ValueError: ``samples`` < 1, ``interval_ms`` <= 0 or ``dither`` outside [0, 1).
    """
    if samples < 1 or not interval_ms > 0 or not 0 <= dither < 1:
        raise ValueError(
            f"a burst needs samples >= 1, interval_ms > 0 and 0 <= dither < 1, got {samples}, "
            f"{interval_ms}, {dither}"
        )
    shift = random.Random().random if dither else None
    interval_s = interval_ms / 1000.0
    tally = _Tally()
    lateness: list[float] = []
    taken_at: list[float] = []
    missed = 0
    wall0, t0 = wall_clock(), clock()
    for k in range(samples):
        if stop is not None and stop.is_set():
            break
        deadline = t0 + (k + (dither * shift() if shift and k else 0.0)) * interval_s
        _sleep_until(deadline, clock, sleep)
        snapshot = take()
        if snapshot is None:
            missed += 1
        else:
            lateness.append(snapshot.at - deadline)
            taken_at.append(snapshot.at)
            tally.add(snapshot.threads, snapshot.chain)
        if progress is not None:
            progress(k + 1, samples)
    if not (stop is not None and stop.is_set()):
        _sleep_until(t0 + samples * interval_s, clock, sleep)
    return StackBurst(
        start=wall0,
        end=wall0 + timedelta(seconds=clock() - t0),
        samples=len(lateness),
        interval_ms=achieved_interval_ms(taken_at, interval_ms),
        jitter_ms_p99=jitter_p99_ms(lateness),
        threads=tally.result(),
        missed=missed,
        planned_samples=samples,
        planned_interval_ms=float(interval_ms),
    )


class StackSampler:
    """Samples the stacks of every thread of THIS process (``sys._current_frames``).

    The frames come from ``frame_source``: by default ``frames.current_frames``; then, where the
    collector can deadlock or crash the process against stack reading (CPython before 3.12,
    gh-106883), it is paused over the whole sample, the call and the walk of every stack
    (:mod:`bpmon.collectors.frames`). A frame source passed in is called as it is.
    The calling thread is left out, and so is every thread the profile ignores. Stacks are
    classified once per distinct stack (keyed by its code objects). A thread whose innermost
    frame (and that frame's caller) is the same frame object as at the previous sample is still
    inside the same call, so its stack and state are unchanged and its frames are not walked:
    a thread blocked in a queue costs one identity check per sample.
    """

    def __init__(
        self,
        profile: Profile,
        frame_source: FrameSource = current_frames,
        thread_names: Callable[[], Mapping[int, str]] = running_thread_names,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        *,
        wall_clock: Callable[[], datetime] = utc_now,
        named_only: bool = False,
        dither: float = 0.0,
    ) -> None:
        """Sample with ``profile``; the outside world (frames, names, time) is injectable.

        ``named_only``: sample only the threads ``thread_names`` lists (a target that knows its
        own threads, among others it must not count). ``dither``: see :func:`record_burst`.
        """
        self.profile = profile
        self._named_only = named_only
        self._dither = dither
        self._classifier = StackClassifier(profile)
        self._frame_source = frame_source
        self._pause_collection = NEEDS_GC_PAUSE and frame_source is current_frames
        self._thread_names = thread_names
        self._clock = clock
        self._sleep = sleep
        self._wall_clock = wall_clock
        self._ignored: dict[str, bool] = {}
        # per thread: its innermost frame at the last sample, that frame's caller, and what the
        # stack was read as (state, on the data path).
        self._last: dict[int, tuple[FrameType, FrameType | None, _Reading]] = {}
        # keyed by the ids of the stack's code objects; the value keeps them alive so an id is
        # never reused while it is cached.
        self._stacks: dict[tuple[int, ...], tuple[_Reading, tuple[CodeType, ...]]] = {}

    def burst(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> StackBurst:
        """Take ``samples`` samples ``interval_ms`` apart (Flink's default: 100 x 50 ms)."""
        try:
            return record_burst(
                self.sample,
                samples,
                interval_ms,
                clock=self._clock,
                sleep=self._sleep,
                wall_clock=self._wall_clock,
                progress=progress,
                stop=stop,
                dither=self._dither,
            )
        finally:
            self._last.clear()  # hold no frames (and their locals) between bursts

    def sample(self) -> Snapshot:
        """One sample now: the state of every sampled thread, all read at the same instant."""
        if not self._pause_collection:
            return self._sample()
        with collection_paused():
            return self._sample()

    def _sample(self) -> Snapshot:
        at = self._clock()
        frames = self._frame_source()
        names = self._thread_names()
        me = threading.get_ident()
        states: list[ThreadState] = []
        chain: dict[int, int] = {}
        reads_chains = self.profile.chain_hop is not None
        last, self._last = self._last, {}
        for ident, frame in frames.items():
            if ident == me:
                continue
            name = names.get(ident)
            if name is None:
                if self._named_only:
                    continue
                name = f"thread-{ident}"
            if self._is_ignored(name):
                continue
            seen = last.get(ident)
            if seen is not None and seen[0] is frame and seen[1] is frame.f_back:
                reading = seen[2]  # still inside the same call: the same stack
            else:
                reading = self._read(frame)
            self._last[ident] = (frame, frame.f_back, reading)
            states.append((ident, name, reading[0], reading[1]))
            if reads_chains and reading[0] == "busy":
                chain[ident] = reading[2]
        return Snapshot(at, states, chain)

    def _is_ignored(self, name: str) -> bool:
        ignored = self._ignored.get(name)
        if ignored is None:
            ignored = self._ignored[name] = self.profile.ignores(name)
        return ignored

    def _read(self, frame: FrameType) -> _Reading:
        codes: list[CodeType] = []
        f: FrameType | None = frame
        while f is not None:
            codes.append(f.f_code)
            f = f.f_back
        key = tuple(map(id, codes))
        hit = self._stacks.get(key)
        if hit is not None:
            return hit[0]
        texts = [f"{code.co_filename}:{code.co_qualname}" for code in codes]
        reading = self._classifier.read_chain(texts)
        if len(self._stacks) >= _CACHE_LIMIT:
            self._stacks.clear()
        self._stacks[key] = (reading, tuple(codes))
        return reading


class _Tally:
    """Counts per thread (id and name) over the samples of a burst, whether any of its samples
    showed it on the data path, and its busy samples per chain position."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, str], dict[SampleState, int]] = {}
        self._on_path: set[tuple[int, str]] = set()
        self._chain: dict[tuple[int, str], list[int]] = {}

    def add(self, threads: Iterable[ThreadState], chain: ChainDepths) -> None:
        for ident, name, state, on_path in threads:
            counts = self._counts.get((ident, name))
            if counts is None:
                counts = self._counts[(ident, name)] = {"backpressured": 0, "idle": 0, "busy": 0}
            counts[state] += 1
            if on_path:
                self._on_path.add((ident, name))
            depth = chain.get(ident) if state == "busy" else None
            if depth is not None:
                count_position(self._chain.setdefault((ident, name), []), depth)

    def result(self) -> tuple[ThreadCounts, ...]:
        ordered = sorted(self._counts.items(), key=lambda item: (item[0][1], item[0][0]))
        return tuple(
            ThreadCounts(
                name,
                ident,
                c["backpressured"],
                c["idle"],
                c["busy"],
                (ident, name) in self._on_path,
                tuple(self._chain.get((ident, name), ())),
            )
            for (ident, name), c in ordered
        )


def count_position(counts: list[int], position: int) -> None:
    """Count one busy sample at chain ``position`` in ``counts`` (grown as needed)."""
    if position >= len(counts):
        counts.extend([0] * (position + 1 - len(counts)))
    counts[position] += 1


def _sleep_until(
    deadline: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> None:
    remaining = deadline - clock()
    while remaining > 0:
        sleep(remaining)
        remaining = deadline - clock()


def achieved_interval_ms(taken_at: list[float], planned_ms: float) -> float:
    """The mean gap between consecutive samples taken; the planned one below two samples."""
    if len(taken_at) < 2:
        return float(planned_ms)
    return round((taken_at[-1] - taken_at[0]) / (len(taken_at) - 1) * 1000.0, 3)


def jitter_p99_ms(lateness: list[float]) -> float | None:
    """The 99th percentile of how late the samples were, relative to the earliest."""
    if not lateness:
        return None
    base = min(lateness)
    ordered = sorted(x - base for x in lateness)
    rank = max(1, math.ceil(0.99 * len(ordered)))
    return round(ordered[rank - 1] * 1000.0, 3)
