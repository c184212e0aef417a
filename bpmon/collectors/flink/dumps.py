"""Stack samples of Flink task threads, from task managers' thread dumps: taken and read.

``GET /taskmanagers/{id}/thread-dump`` answers ``{"threadInfos": [{"threadName",
"stringifiedThreadInfo"}]}``: every thread of the task manager's JVM, its stack written as
``jstack`` does (``\\tat module@version/package.Class.method(File.java:12)``), up to
``cluster.thread-dump.stacktrace-max-depth`` frames (50 by default). One dump is one sample.

A task thread is named ``"{vertex} ({index+1}/{parallelism})#{attempt}"`` (Flink's name of the
vertex, not bpmon's: see :mod:`~bpmon.collectors.flink.plan`): it is matched to the subtask by
that name AND by the task manager and attempt Flink reports for the subtask, so a restarted
task's old thread, or another job's vertex of the same name on another task manager, is not
counted. Helper threads that carry a task's name (``OutputFlusher for ...``, ``System Time
Trigger for ...``) are left out by the profile's ``ignore`` list.

Two vertices of the same name (Flink allows it) are told apart by what their threads' names
carry: the parallelism (``work (1/2)`` and ``work (1/3)``), the task manager, the attempt. When
all of these are the same, nothing in a dump says which thread is which: a thread's stack shows
the same frames for both, its JVM id follows the order in which the task manager received the
tasks, which Flink's deployment does not fix (it prepares each deployment on a thread pool).
bpmon does not guess: those subtasks' samples are left out (:meth:`Tally.ambiguous`), their
levels come from Flink's time accounting, and the report says so.

A legacy source (a ``SourceFunction``) runs its loop on a thread of its own, ``"Legacy Source
Thread - {task thread's name}"``, while its task thread only waits for mail: that thread's stack
is the subtask's sample (blocked requesting a buffer when its output is full), never the task
thread's.

Each sample is classified by the ``flink-jvm`` profile. Since Flink 1.10 a task whose output is
full is *suspended* in its mailbox, exactly as one without input: the profile lists that wait as
``suspended``. :class:`Tally` keeps those samples apart, and :meth:`Tally.counts` splits them
between backpressured and idle in the proportion of the task's own time accounting over the
window (soft-backpressured vs idle ms/s). A sample blocked requesting a buffer (hard
backpressure) is exact, and so is a busy one. A busy sample of a chained task is also counted at
its chain position: the ``ChainingOutput.pushToOperator`` frames on its stack (the profile's
``chain_hop``), 0 in the chain's head.

A window of dumps (:class:`SampleGrid`, :func:`dump_sample`) fetches every task manager's dump at
once per sample, at the planned instants; a dump takes longer than 50 ms on a busy task manager,
so a sample whose slot passed meanwhile is skipped, not taken late.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

from bpmon.collectors.flink.rest import FlinkRest
from bpmon.collectors.profile import StackClassifier
from bpmon.collectors.sampler import (
    Progress,
    StopSignal,
    ThreadCounts,
    achieved_interval_ms,
    count_position,
    jitter_p99_ms,
)
from bpmon.model.clock import utc_now
from bpmon.model.values import Window

_FRAME = re.compile(r"^\s*at (?:[\w.@-]*/{1,2})?(?P<frame>[^\s(]+)\(")
_ATTEMPT = re.compile(r"#(\d+)$")
LEGACY_SOURCE_THREAD = "Legacy Source Thread - "
"""The prefix Flink gives a legacy source's own thread, before its task thread's name."""

SubtaskKey = tuple[str, int]
"""A subtask as (Flink's vertex id, index from 0)."""


@dataclass(frozen=True, slots=True)
class TaskThread:
    """Which thread a subtask runs on: its name without the attempt (``"work (1/2)"``), and the
    attempt (the name's ``#n``)."""

    name: str
    attempt: int


def task_thread(task_name: str, index: int, parallelism: int, attempt: int) -> TaskThread:
    """The thread Flink runs subtask ``index`` of a vertex named ``task_name`` on."""
    return TaskThread(f"{task_name} ({index + 1}/{parallelism})", attempt)


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """One thread of a dump: its name and its frames, innermost first (``package.Class.method``)."""

    name: str
    frames: tuple[str, ...]


def parse_dump(answer: Mapping[str, object]) -> list[ThreadStack]:
    """The threads of one ``thread-dump`` answer."""
    infos = answer.get("threadInfos")
    threads = []
    for info in infos if isinstance(infos, list) else []:
        name = str(info.get("threadName", ""))
        text = str(info.get("stringifiedThreadInfo", ""))
        frames = tuple(m.group("frame") for m in map(_FRAME.match, text.splitlines()) if m)
        threads.append(ThreadStack(name, frames))
    return threads


def attempt_of(thread_name: str) -> int | None:
    """The attempt number a task thread's name ends with (``#2``), None without one."""
    found = _ATTEMPT.search(thread_name)
    return int(found.group(1)) if found else None


@dataclass(slots=True)
class _Counts:
    backpressured: int = 0
    idle: int = 0
    busy: int = 0
    suspended: int = 0
    chain: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.backpressured + self.idle + self.busy + self.suspended


@dataclass(slots=True)
class Tally:
    """Per subtask, how its samples of one burst were classified.

    Args:
        classifier: reads a stack with the ``flink-jvm`` profile.
        expected: per task manager id, the subtasks it runs and their threads:
            ``{tm: {(vertex id, index): TaskThread}}``.
    """

    classifier: StackClassifier
    expected: Mapping[str, Mapping[SubtaskKey, TaskThread]]
    names: dict[SubtaskKey, str] = field(default_factory=dict, init=False)
    _counts: dict[SubtaskKey, _Counts] = field(default_factory=dict, init=False)
    _ambiguous: set[SubtaskKey] = field(default_factory=set, init=False)
    _lookup: dict[tuple[str, str], list[tuple[SubtaskKey, int]]] = field(
        default_factory=dict, init=False
    )
    _dumps: dict[str, int] = field(default_factory=dict, init=False)
    _seen: dict[SubtaskKey, int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for tm, subtasks in self.expected.items():
            for key, thread in subtasks.items():
                self._lookup.setdefault((tm, thread.name), []).append((key, thread.attempt))

    def add(self, task_manager: str, threads: Iterable[ThreadStack]) -> int:
        """Count one dump of ``task_manager``; returns how many of its task threads matched."""
        profile = self.classifier.profile
        self._dumps[task_manager] = self._dumps.get(task_manager, 0) + 1
        matched = 0
        threads = list(threads)
        legacy = {
            t.name.removeprefix(LEGACY_SOURCE_THREAD): t.frames
            for t in threads
            if t.name.startswith(LEGACY_SOURCE_THREAD)
        }
        for t in threads:
            if profile.ignores(t.name) or profile.subtask_of(t.name) is None:
                continue
            key = self._subtask(task_manager, t.name)
            if key is None:
                continue
            self.names[key] = t.name
            self._count(key, legacy.get(t.name, t.frames))
            matched += 1
        return matched

    def _subtask(self, task_manager: str, thread_name: str) -> SubtaskKey | None:
        """The one subtask ``thread_name`` on ``task_manager`` is, None if none or several."""
        attempt = attempt_of(thread_name)
        base = _ATTEMPT.sub("", thread_name)
        found = [
            key
            for key, expected in self._lookup.get((task_manager, base), [])
            if attempt in (None, expected)
        ]
        for key in found:
            self._seen[key] = self._seen.get(key, 0) + 1
        if len(found) > 1:
            self._ambiguous.update(found)
            return None
        return found[0] if found else None

    def add_stack(self, key: SubtaskKey, frames: tuple[str, ...], count: int) -> None:
        """Count ``count`` samples of subtask ``key`` whose stack was ``frames`` (innermost
        first): Flink's own sampler gives each distinct stack once, with how many samples had
        it (:mod:`~bpmon.collectors.flink.flame`). Classified as a dump's thread is."""
        for _ in range(count):
            self._count(key, frames)

    def _count(self, key: SubtaskKey, frames: tuple[str, ...]) -> None:
        counts = self._counts.setdefault(key, _Counts())
        state, _, position = self.classifier.read_chain(frames)
        if state == "idle" and self.classifier.suspended(frames):
            counts.suspended += 1
        elif state == "backpressured":
            counts.backpressured += 1
        elif state == "idle":
            counts.idle += 1
        else:
            counts.busy += 1
            if self.classifier.profile.chain_hop is not None:
                count_position(counts.chain, position)

    def ambiguous(self) -> frozenset[SubtaskKey]:
        """The subtasks whose thread cannot be told from another's (same name, task manager and
        attempt): never counted."""
        return frozenset(self._ambiguous)

    def missed(self) -> list[tuple[SubtaskKey, int, int]]:
        """The expected subtasks some dump of their task manager did not show (a running task's
        thread is in every dump): ``(key, dumps that showed it, dumps)``. Any means the job
        restarted while the dumps were taken, or before, and the placement is out of date."""
        return [
            (key, self._seen.get(key, 0), self._dumps[tm])
            for tm, subtasks in self.expected.items()
            if self._dumps.get(tm)
            for key in subtasks
            if self._seen.get(key, 0) < self._dumps[tm]
        ]

    def counts(self, key: SubtaskKey, soft_share: float | None) -> ThreadCounts:
        """The subtask's counts, its suspended samples split by ``soft_share`` (the backpressured
        share of its suspended time; None: all idle, as the stack alone says)."""
        c = self._counts.get(key, _Counts())
        soft = round(c.suspended * soft_share) if soft_share is not None else 0
        return ThreadCounts(
            name=self.names.get(key, ""),
            ident=0,
            backpressured=c.backpressured + soft,
            idle=c.idle + c.suspended - soft,
            busy=c.busy,
            chain=tuple(c.chain),
        )

    def suspended(self, key: SubtaskKey) -> int:
        """How many of the subtask's samples found it suspended in its mailbox."""
        c = self._counts.get(key)
        return c.suspended if c is not None else 0

    def hard(self, key: SubtaskKey) -> int:
        """How many of the subtask's samples found it blocked requesting a buffer."""
        c = self._counts.get(key)
        return c.backpressured if c is not None else 0


@dataclass(frozen=True, slots=True)
class DumpCost:
    """What the thread dumps of one burst cost: how many, their median time and size."""

    dumps: int
    median_ms: float
    median_bytes: int


@dataclass(frozen=True, slots=True)
class SampleGrid:
    """The planned instants of a window's samples: ``samples``, ``interval_ms`` apart.

    A thread dump takes longer than 50 ms on a busy task manager, so a sample whose slot passed
    while the previous one was still being fetched is skipped, not taken late: the window keeps
    its planned length, and says how many samples were taken.
    """

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    samples: int
    interval_ms: float

    def run(
        self,
        sample: Callable[[], list[tuple[float, int]]],
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> tuple[Window, list[tuple[float, int]]]:
        """Call ``sample`` at each instant of the grid (it returns each dump's seconds and
        bytes); the window as taken, and every dump's cost."""
        began_wall, taken, lateness, costs = utc_now(), [], [], []
        t0, interval_s = self.clock(), self.interval_ms / 1000
        for k in range(self.samples):
            if stop is not None and stop.is_set():
                break
            deadline = t0 + k * interval_s
            if self.clock() > deadline + interval_s:
                continue  # the previous dump overran this sample's slot: skipped, not late
            while (left := deadline - self.clock()) > 0:
                self.sleep(left)
            at = self.clock()
            costs.extend(sample())
            taken.append(at)
            lateness.append(at - deadline)
            if progress is not None:
                progress(k + 1, self.samples)
        end = t0 + self.samples * interval_s
        while not (stop is not None and stop.is_set()) and (left := end - self.clock()) > 0:
            self.sleep(left)
        window = Window(
            start=began_wall,
            end=began_wall + timedelta(seconds=self.clock() - t0),
            samples=len(taken),
            interval_ms=achieved_interval_ms(taken, self.interval_ms),
            jitter_ms_p99=jitter_p99_ms(lateness),
            planned_samples=self.samples,
            planned_interval_ms=float(self.interval_ms),
        )
        return window, costs


def dump_cost(costs: list[tuple[float, int]]) -> DumpCost | None:
    """The median of the dumps' (seconds, bytes); None without a dump."""
    if not costs:
        return None
    return DumpCost(
        dumps=len(costs),
        median_ms=statistics.median(c[0] for c in costs) * 1000,
        median_bytes=int(statistics.median(c[1] for c in costs)),
    )


def dump_sample(rest: FlinkRest, managers: Sequence[str], tally: Tally) -> list[tuple[float, int]]:
    """One thread-dump sample: every task manager's (``managers``, their ids) dump at once,
    counted in ``tally``; returns (seconds, bytes) per dump."""

    def dump(tm: str) -> tuple[str, object, float, int]:
        before = rest.cost
        answer = rest.get(f"/taskmanagers/{tm}/thread-dump")
        spent = rest.cost - before
        return tm, answer, spent.seconds, spent.bytes

    if len(managers) == 1:
        results = [dump(managers[0])]
    else:
        with ThreadPoolExecutor(len(managers)) as pool:
            results = list(pool.map(dump, managers))
    for tm, answer, _, _ in results:
        tally.add(tm, parse_dump(answer if isinstance(answer, dict) else {}))
    return [(seconds, size) for _, _, seconds, size in results]
