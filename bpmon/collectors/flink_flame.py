"""Flink's own stack samples: a flame graph answer as the stacks bpmon classifies.

``GET /jobs/{job}/vertices/{vertex}/flamegraph?type=full[&subtaskindex=N]`` (Flink 1.13+, one
subtask since 1.17) answers ``{"endTimestamp": ms, "data": node}``, where a node is
``{"name": "package.Class.method:line", "value": samples through it, "children": [...]}`` under a
root named ``root`` whose value is the number of samples. Frames go from the caller
(``java.lang.Thread.run``) to the innermost. A sample whose stack ends at a node counts in that
node's value and in none of its children's: a node's *own* count (its value less its children's)
is the number of samples whose whole stack is the path from the root to it. Those paths are the
stacks :func:`stacks_of` returns, innermost frame first as a thread dump writes them.

Flink answers with placeholders too: ``endTimestamp`` -1 when the vertex (or subtask) is no
longer running, -2 when ``rest.flamegraph.enabled`` is false, -3 while the first samples are being
taken. A graph's ``endTimestamp`` is the JobManager's wall-clock time (ms) when its samples ended;
Flink serves it from a cache until ``rest.flamegraph.refresh-interval`` after that
(:mod:`~bpmon.collectors.flink_config`), so the age of what is served is read from it.

Only the task's own thread is sampled: a legacy ``SourceFunction`` loops on a thread of its own,
which Flink's sampler does not see (its task thread waits for mail, a ``suspended`` sample).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bpmon.model.errors import CollectorError

TERMINATED, DISABLED, WAITING = -1, -2, -3
"""Flink's placeholder ``endTimestamp`` values (``VertexFlameGraph``)."""

FlameState = Literal["graph", "terminated", "disabled", "waiting"]

Stack = tuple[tuple[str, ...], int]
"""A stack (frames innermost first, ``package.Class.method``) and how many samples had it."""


@dataclass(frozen=True, slots=True)
class FlameGraph:
    """One flame graph answer.

    Attributes:
        state: ``graph``, or the placeholder Flink answered instead.
        end_ms: when the samples ended (JobManager wall clock, ms); None for a placeholder.
        stacks: every distinct stack and its sample count.
    """

    state: FlameState
    end_ms: int | None = None
    stacks: tuple[Stack, ...] = ()

    @property
    def samples(self) -> int:
        """How many samples the graph holds."""
        return sum(count for _, count in self.stacks)


_PLACEHOLDERS: dict[int, FlameState] = {
    TERMINATED: "terminated",
    DISABLED: "disabled",
    WAITING: "waiting",
}


def flame_graph(answer: Any, where: str) -> FlameGraph:
    """Parse a ``flamegraph`` answer; ``where`` (the request) names it in errors.

    Raises:
        CollectorError: not a flame graph (one line naming the request).
    """
    end = answer.get("endTimestamp") if isinstance(answer, dict) else None
    if not isinstance(end, int) or isinstance(end, bool):
        raise CollectorError(
            f"{where} answered without an integer endTimestamp; not a Flink flame graph "
            "(point --flink at the JobManager's REST address)"
        )
    if end < 0:
        state = _PLACEHOLDERS.get(end)
        if state is None:
            raise CollectorError(f"{where} answered endTimestamp {end}, which Flink never gives")
        return FlameGraph(state)
    root = answer.get("data")
    if root is None:
        return FlameGraph("graph", end)
    return FlameGraph("graph", end, stacks_of(root, where))


def frame_of(name: str) -> str:
    """``package.Class.method`` of a node's name (``package.Class.method:123``)."""
    head, sep, line = name.rpartition(":")
    return head if sep and line.lstrip("-").isdigit() else name


def stacks_of(root: Mapping[str, Any], where: str) -> tuple[Stack, ...]:
    """Every stack of the tree under ``root`` with its own count (see the module); the root
    itself is not a frame. Walked without recursion: a stack may be deep.

    Raises:
        CollectorError: a node without a name, a count that is not a non-negative integer, or
            children counting more samples than their parent.
    """
    stacks: list[Stack] = []
    todo: list[tuple[Mapping[str, Any], tuple[str, ...]]] = [(root, ())]
    while todo:
        node, path = todo.pop()
        children = _children(node, where)
        own = _value(node, where) - sum(_value(c, where) for c in children)
        if own < 0:
            raise CollectorError(
                f"{where}: the children of {path[-1] if path else 'root'!r} count more samples "
                "than it does; not a Flink flame graph"
            )
        if own and path:
            stacks.append((tuple(reversed(path)), own))
        for child in children:
            name = child.get("name")
            if not isinstance(name, str):
                raise CollectorError(f"{where}: a flame graph node has no name")
            todo.append((child, (*path, frame_of(name))))
    return tuple(stacks)


def _children(node: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    children = node.get("children") or []
    if not isinstance(children, list) or not all(isinstance(c, dict) for c in children):
        raise CollectorError(f"{where}: a flame graph node's children are not a list of nodes")
    return children


def _value(node: Mapping[str, Any], where: str) -> int:
    value = node.get("value")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CollectorError(f"{where}: a flame graph node's value {value!r} is not a count")
    return value
