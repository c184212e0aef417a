"""The in-process stack sampler on real threads, and the absolute schedule of a burst."""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from bpmon.collectors.profile import load_profile
from bpmon.collectors.sampler import Snapshot, StackBurst, StackSampler, record_burst
from bpmon.model.errors import WaitCancelledError
from bpmon.runtime.network_pool import NetworkBufferPool
from tests.waiting import WAIT_S, wait_until

SAMPLES, INTERVAL_MS = 20, 10.0


def start(name: str, target: Callable[[], object]) -> threading.Thread:
    """Start a daemon thread running ``target``; return once it is inside it."""
    ready = threading.Event()

    def run() -> None:
        ready.set()
        target()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    assert ready.wait(WAIT_S)
    code = getattr(getattr(target, "__func__", target), "__code__", None)

    def inside_target() -> bool:  # on its way to the blocking call, or done
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        return frame is not None or not thread.is_alive()

    if code is not None:
        wait_until(inside_target, f"{name} to call its target")
    return thread


def ratio(burst: StackBurst, name: str, state: str) -> float:
    counts = burst.thread(name)
    return int(getattr(counts, state)) / counts.total


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_queue_threads_are_classified_from_their_real_stacks(stop: threading.Event) -> None:
    full: queue.Queue[int] = queue.Queue(maxsize=1)
    full.put(0)
    empty: queue.Queue[int] = queue.Queue()

    def spin() -> None:
        while not stop.is_set():
            sum(range(200))

    def sleepy() -> None:  # a stage calling a slow external system: off-CPU, but busy
        while not stop.is_set():
            time.sleep(0.002)

    start("producer-0", lambda: full.put(1))
    start("consumer-0", empty.get)
    start("cpu-0", spin)
    start("io-0", sleepy)
    burst = StackSampler(load_profile("python-queue")).burst(SAMPLES, INTERVAL_MS)
    full.get()
    empty.put(0)
    assert burst.samples == SAMPLES
    assert ratio(burst, "producer-0", "backpressured") >= 0.9
    assert ratio(burst, "consumer-0", "idle") >= 0.9
    assert ratio(burst, "cpu-0", "busy") >= 0.9
    assert ratio(burst, "io-0", "busy") >= 0.9
    assert burst.thread("producer-0").total == SAMPLES
    # only the threads seen in a queue operation are on the data path
    on_path = {t.name: t.data_path for t in burst.threads}
    assert on_path["producer-0"] and on_path["consumer-0"]
    assert not on_path["cpu-0"] and not on_path["io-0"]


def test_a_keeper_thread_sleeping_or_joining_is_off_the_data_path(stop: threading.Event) -> None:
    items: queue.Queue[int] = queue.Queue()

    def keep() -> None:
        while not stop.is_set():
            time.sleep(0.005)

    def stage() -> None:  # polls its input queue: a stage, seen in Queue.get
        while not stop.is_set():
            with contextlib.suppress(queue.Empty):
                items.get(timeout=0.001)

    start("keeper", keep)
    joiner = start("joiner", lambda: start("held", lambda: stop.wait(5)).join())
    start("stage-0", stage)
    burst = StackSampler(load_profile("python-queue")).burst(SAMPLES, INTERVAL_MS)
    stop.set()
    joiner.join(timeout=5)
    on_path = {t.name: t.data_path for t in burst.threads}
    assert on_path["stage-0"]
    assert not on_path["keeper"] and not on_path["joiner"] and not on_path["held"]
    assert ratio(burst, "joiner", "idle") >= 0.9  # idle, but idle on no queue


def test_every_thread_is_on_the_data_path_for_a_profile_that_cannot_tell() -> None:
    start("not-a-task (1/1)", lambda: time.sleep(0.5))
    burst = StackSampler(load_profile("bpmon-runtime")).burst(3, 1.0)
    assert burst.threads and all(t.data_path for t in burst.threads)


def test_multiprocessing_queue_put_and_get(stop: threading.Event) -> None:
    ctx = multiprocessing.get_context("spawn")
    full: multiprocessing.Queue[int] = ctx.Queue(maxsize=1)
    full.put(0)
    empty: multiprocessing.Queue[int] = ctx.Queue()
    producer = start("mp-producer-0", lambda: full.put(1))
    consumer = start("mp-consumer-0", empty.get)
    burst = StackSampler(load_profile("python-queue")).burst(SAMPLES, INTERVAL_MS)
    full.get(timeout=2)
    empty.put(0)
    for thread in (producer, consumer):
        thread.join(timeout=5)
    assert ratio(burst, "mp-producer-0", "backpressured") >= 0.9
    assert ratio(burst, "mp-consumer-0", "idle") >= 0.9
    for q in (full, empty):
        q.close()
        q.join_thread()


def test_runtime_thread_blocked_on_its_buffer_pool_is_backpressured() -> None:
    """A task thread waiting in the runtime's LocalBufferPool, with the bpmon-runtime profile."""
    network = NetworkBufferPool(1, 32768)
    with network.lock:
        pool = network.create_pool(1, 1)
        pool.request_buffer_builder_blocking()  # takes the only segment

    def request() -> None:
        # woken with WaitCancelledError when the pool is destroyed
        with pool.lock, contextlib.suppress(WaitCancelledError):
            pool.request_buffer_builder_blocking()

    start("map (1/1)", request)
    start("not-a-task", lambda: time.sleep(0.5))
    burst = StackSampler(load_profile("bpmon-runtime")).burst(SAMPLES, INTERVAL_MS)
    with pool.lock:
        pool.destroy()
    assert ratio(burst, "map (1/1)", "backpressured") >= 0.9
    assert "not-a-task" not in {t.name for t in burst.threads}


def test_the_sampling_thread_itself_is_left_out() -> None:
    burst = StackSampler(load_profile("python-queue")).burst(3, 1.0)
    assert threading.current_thread().name not in {t.name for t in burst.threads}


def test_real_burst_lasts_samples_times_interval() -> None:
    """On the real clock a burst takes every sample and never ends early. That late wake-ups do
    not drift is shown on a late clock below; how late a loaded machine wakes the sampler is
    measured by bench_sampling.py (jitter p99), not asserted here."""
    burst = StackSampler(load_profile("python-queue")).burst(SAMPLES, INTERVAL_MS)
    duration = (burst.end - burst.start).total_seconds()
    assert duration >= SAMPLES * INTERVAL_MS / 1000
    assert burst.samples + burst.missed == SAMPLES
    assert burst.jitter_ms_p99 is not None and burst.jitter_ms_p99 >= 0


class LateClock:
    """A monotonic clock whose sleeps wake up late by a given overshoot each time."""

    def __init__(self, overshoots_s: list[float]) -> None:
        self.now = 100.0
        self._overshoots = overshoots_s
        self._calls = 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + self._overshoots[self._calls % len(self._overshoots)]
        self._calls += 1


def burst_with(clock: LateClock, samples: int) -> tuple[StackBurst, list[float]]:
    taken: list[float] = []

    def take() -> Snapshot:
        taken.append(clock())
        return Snapshot(clock(), [(1, "w-0", "busy", True)])

    burst = record_burst(take, samples, 50.0, clock=clock, sleep=clock.sleep)
    return burst, taken


def test_deadlines_are_absolute_so_late_wakeups_do_not_drift() -> None:
    clock = LateClock([0.003])
    burst, taken = burst_with(clock, 10)
    offsets = [t - 100.0 - k * 0.05 for k, t in enumerate(taken)]
    assert offsets[0] == pytest.approx(0.0)  # the first sample is due at once
    assert offsets[1:] == pytest.approx([0.003] * 9)  # each later one 3 ms late, never more
    assert (burst.end - burst.start).total_seconds() == pytest.approx(10 * 0.05 + 0.003)
    assert burst.samples == 10


def test_jitter_is_the_p99_spread_of_lateness() -> None:
    burst, _ = burst_with(LateClock([0.001, 0.004]), 11)
    # lateness: 0 ms for the first sample, then 1 or 4 ms: the spread is 4 ms.
    assert burst.jitter_ms_p99 == pytest.approx(4.0)


def test_progress_is_reported_and_stop_ends_the_burst_early() -> None:
    clock = LateClock([0.0])
    stop = threading.Event()
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if done == 3:
            stop.set()

    burst = record_burst(
        lambda: Snapshot(clock(), []),
        10,
        50.0,
        clock=clock,
        sleep=clock.sleep,
        progress=progress,
        stop=stop,
    )
    assert seen == [(1, 10), (2, 10), (3, 10)]
    assert burst.samples == 3


def test_missed_samples_are_counted_apart() -> None:
    clock = LateClock([0.0])
    results = iter([None, Snapshot(100.05, [(1, "w-0", "idle", True)]), None])
    burst = record_burst(lambda: next(results), 3, 50.0, clock=clock, sleep=clock.sleep)
    assert (burst.samples, burst.missed) == (1, 2)
    assert burst.thread("w-0").idle == 1


def test_a_burst_needs_samples_and_a_positive_interval() -> None:
    with pytest.raises(ValueError, match="samples"):
        record_burst(lambda: None, 0, 50.0)
    with pytest.raises(ValueError, match="interval_ms"):
        record_burst(lambda: None, 5, 0.0)
