"""Stack samples of Flink task threads, from task managers' thread dumps.

``GET /taskmanagers/{id}/thread-dump`` answers ``{"threadInfos": [{"threadName",
"stringifiedThreadInfo"}]}``: every thread of the task manager's JVM, its stack written as
``jstack`` does (``\\tat module@version/package.Class.method(File.java:12)``), up to
``cluster.thread-dump.stacktrace-max-depth`` frames (50 by default). One dump is one sample.

A task thread is named ``"{vertex} ({index+1}/{parallelism})#{attempt}"``: it is matched to the
subtask by that name AND by the task manager and attempt Flink reports for the subtask, so a
restarted task's old thread, or another job's vertex of the same name on another task manager, is
not counted. Helper threads that carry a task's name (``OutputFlusher for ...``, ``System Time
Trigger for ...``) are left out by the profile's ``ignore`` list.

A legacy source (a ``SourceFunction``) runs its loop on a thread of its own, ``"Legacy Source
Thread - {task thread's name}"``, while its task thread only waits for mail: that thread's stack
is the subtask's sample (blocked requesting a buffer when its output is full), never the task
thread's.

Each sample is classified by the ``flink-jvm`` profile. Since Flink 1.10 a task whose output is
full is *suspended* in its mailbox, exactly as one without input: the profile lists that wait as
``suspended``. :class:`Tally` keeps those samples apart, and :meth:`Tally.counts` splits them
between backpressured and idle in the proportion of the task's own time accounting over the
window (soft-backpressured vs idle ms/s). A sample blocked requesting a buffer (hard
backpressure) is exact, and so is a busy one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bpmon.collectors.profile import StackClassifier
from bpmon.collectors.sampler import ThreadCounts

_FRAME = re.compile(r"^\s*at (?:[\w.@-]*/{1,2})?(?P<frame>[^\s(]+)\(")
_ATTEMPT = re.compile(r"#(\d+)$")
LEGACY_SOURCE_THREAD = "Legacy Source Thread - "
"""The prefix Flink gives a legacy source's own thread, before its task thread's name."""

SubtaskKey = tuple[str, int]
"""A subtask as (vertex name, index from 0)."""


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

    @property
    def total(self) -> int:
        return self.backpressured + self.idle + self.busy + self.suspended


@dataclass(slots=True)
class Tally:
    """Per subtask, how its samples of one burst were classified.

    Args:
        classifier: reads a stack with the ``flink-jvm`` profile.
        expected: per task manager id, the subtasks it runs and their attempts:
            ``{tm: {(vertex, index): attempt}}``.
    """

    classifier: StackClassifier
    expected: Mapping[str, Mapping[SubtaskKey, int]]
    names: dict[SubtaskKey, str] = field(default_factory=dict)
    _counts: dict[SubtaskKey, _Counts] = field(default_factory=dict)

    def add(self, task_manager: str, threads: Iterable[ThreadStack]) -> int:
        """Count one dump of ``task_manager``; returns how many of its task threads matched."""
        mine = self.expected.get(task_manager, {})
        profile = self.classifier.profile
        matched = 0
        threads = list(threads)
        legacy = {
            t.name.removeprefix(LEGACY_SOURCE_THREAD): t.frames
            for t in threads
            if t.name.startswith(LEGACY_SOURCE_THREAD)
        }
        for t in threads:
            if profile.ignores(t.name):
                continue
            found = profile.subtask_of(t.name)
            if found is None or found[1] is None:
                continue
            key = (found[0], found[1] - 1)  # thread names count from 1
            if key not in mine or attempt_of(t.name) not in (None, mine[key]):
                continue
            counts = self._counts.setdefault(key, _Counts())
            self.names[key] = t.name
            frames = legacy.get(t.name, t.frames)
            state = self.classifier.classify(frames)
            if state == "idle" and self.classifier.suspended(frames):
                counts.suspended += 1
            elif state == "backpressured":
                counts.backpressured += 1
            elif state == "idle":
                counts.idle += 1
            else:
                counts.busy += 1
            matched += 1
        return matched

    def counts(self, key: SubtaskKey, soft_share: float | None) -> ThreadCounts:
        """The subtask's counts, its suspended samples split by ``soft_share`` (the backpressured
        share of its suspended time; None: all idle, as the stack alone says)."""
        c = self._counts.get(key, _Counts())
        soft = round(c.suspended * soft_share) if soft_share is not None else 0
        return ThreadCounts(
            name=self.names.get(key, f"{key[0]} ({key[1] + 1}/?)"),
            ident=0,
            backpressured=c.backpressured + soft,
            idle=c.idle + c.suspended - soft,
            busy=c.busy,
        )

    def suspended(self, key: SubtaskKey) -> int:
        """How many of the subtask's samples found it suspended in its mailbox."""
        c = self._counts.get(key)
        return c.suspended if c is not None else 0

    def hard(self, key: SubtaskKey) -> int:
        """How many of the subtask's samples found it blocked requesting a buffer."""
        c = self._counts.get(key)
        return c.backpressured if c is not None else 0
