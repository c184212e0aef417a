"""The job graph as plain operator names: downstream edges, reachability, cycles, topological order.

Both the loader (which must name a cycle before any spec exists) and :class:`Scenario` (which
orders its operators) work on ``inputs_of``: each operator name mapped to the names it reads
from, in file order. Ties are always broken by file order, so every result is repeatable.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence


def downstream_map(inputs_of: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each operator mapped to the distinct operators reading from it, in file order."""
    down: dict[str, list[str]] = {name: [] for name in inputs_of}
    for name, inputs in inputs_of.items():
        for upstream in inputs:
            if upstream in down and name not in down[upstream]:
                down[upstream].append(name)
    return down


def reachable(starts: Sequence[str], inputs_of: Mapping[str, Sequence[str]]) -> set[str]:
    """The operators that records leaving ``starts`` can reach, ``starts`` included."""
    down = downstream_map(inputs_of)
    seen = set(starts)
    todo = list(starts)
    while todo:
        for nxt in down[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def find_cycle(inputs_of: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle in the direction records flow, as ``[a, b, ..., a]``; ``None`` if acyclic."""
    down = downstream_map(inputs_of)
    state = dict.fromkeys(down, 0)  # 0: unvisited, 1: on the current path, 2: done
    for start in down:
        if state[start] == 0:
            cycle = _cycle_from(start, down, state)
            if cycle is not None:
                return cycle
    return None


def _cycle_from(
    start: str, down: Mapping[str, list[str]], state: dict[str, int]
) -> list[str] | None:
    """Depth-first search from ``start``, iterative: deep chains cannot hit the recursion limit."""
    path = [start]
    stack: list[Iterator[str]] = [iter(down[start])]
    state[start] = 1
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            state[path.pop()] = 2
            stack.pop()
        elif state[nxt] == 1:
            return [*path[path.index(nxt) :], nxt]
        elif state[nxt] == 0:
            state[nxt] = 1
            path.append(nxt)
            stack.append(iter(down[nxt]))
    return None


def topological_sort(inputs_of: Mapping[str, Sequence[str]]) -> list[str]:
    """Every operator after all it reads from; among ready ones, file order first.

    Raises:
        ValueError: the graph has a cycle (a loaded scenario never has one).
    """
    position = {name: i for i, name in enumerate(inputs_of)}
    down = downstream_map(inputs_of)
    waiting = {name: len(set(inputs)) for name, inputs in inputs_of.items()}
    ready = [position[name] for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    names = list(inputs_of)
    order: list[str] = []
    while ready:
        name = names[heapq.heappop(ready)]
        order.append(name)
        for nxt in down[name]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, position[nxt])
    if len(order) != len(names):
        raise ValueError(f"the graph has a cycle: {' -> '.join(find_cycle(inputs_of) or [])}")
    return order
