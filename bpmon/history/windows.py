"""The windows a part file holds: a set of (run id, burst), kept as ranges of bursts per run.

Every part the store writes records its windows in its Parquet metadata (``docs/history.md``),
and a compacted part records the windows of every part it replaced, so a reader can tell which
parts a compacted one covers without opening them, and an append can tell that its window is
already in the dataset. A watch's bursts are consecutive, so a day of one run at a burst a second
is a single range: the set stays a few bytes however many windows it holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

Range = tuple[int, int]
"""Bursts ``first`` to ``last``, both included."""


@dataclass(frozen=True, slots=True)
class Windows:
    """An immutable set of windows: run id -> sorted, disjoint, non-adjacent burst ranges."""

    runs: tuple[tuple[str, tuple[Range, ...]], ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, int]]) -> Windows:
        """The set of the (run id, burst) ``pairs`` (duplicates allowed)."""
        bursts: dict[str, set[int]] = {}
        for run, burst in pairs:
            bursts.setdefault(run, set()).add(int(burst))
        return cls(tuple((run, _ranges(sorted(b))) for run, b in sorted(bursts.items())))

    @classmethod
    def one(cls, run: str, burst: int) -> Windows:
        """The set of a single window."""
        return cls(((run, ((burst, burst),)),))

    def __len__(self) -> int:
        return sum(last - first + 1 for _, ranges in self.runs for first, last in ranges)

    def __bool__(self) -> bool:
        return bool(self.runs)

    def __contains__(self, window: object) -> bool:
        if not isinstance(window, tuple) or len(window) != 2:
            return False
        run, burst = window
        ranges = self._by_run().get(run, ())
        return any(first <= burst <= last for first, last in ranges)

    def _by_run(self) -> dict[str, tuple[Range, ...]]:
        return dict(self.runs)

    def pairs(self) -> Iterator[tuple[str, int]]:
        """Every (run id, burst), in order."""
        for run, ranges in self.runs:
            for first, last in ranges:
                for burst in range(first, last + 1):
                    yield run, burst

    def union(self, *others: Windows) -> Windows:
        """The windows in this set or in any of ``others``."""
        merged: dict[str, list[Range]] = {}
        for windows in (self, *others):
            for run, ranges in windows.runs:
                merged.setdefault(run, []).extend(ranges)
        return Windows(tuple((run, _merge(r)) for run, r in sorted(merged.items())))

    def covers(self, other: Windows) -> bool:
        """Whether every window of ``other`` is in this set."""
        mine = self._by_run()
        return all(
            any(f <= first and last <= la for f, la in mine.get(run, ()))
            for run, ranges in other.runs
            for first, last in ranges
        )

    def meets(self, other: Windows) -> bool:
        """Whether this set and ``other`` share a window."""
        mine = self._by_run()
        return any(
            f <= last and first <= la
            for run, ranges in other.runs
            for first, last in ranges
            for f, la in mine.get(run, ())
        )

    def encode(self) -> bytes:
        """The set as compact JSON: ``{"run id": [[first, last], ...], ...}``."""
        document = {run: [list(r) for r in ranges] for run, ranges in self.runs}
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Windows:
        """The set :meth:`encode` wrote; ValueError when ``data`` is not one."""
        document: Any = json.loads(data.decode("utf-8"))
        if not isinstance(document, dict):
            raise ValueError("windows: expected a JSON object of run id -> ranges")
        runs = []
        for run, ranges in sorted(document.items()):
            checked = [_range(r) for r in ranges] if isinstance(ranges, list) else None
            if not checked:
                raise ValueError(f"windows of run {run!r}: expected a list of [first, last]")
            runs.append((run, _merge(checked)))
        return cls(tuple(runs))


def _range(value: object) -> Range:
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 0 <= value[0] <= value[1]
    ):
        return value[0], value[1]
    raise ValueError(f"windows: {value!r} is not a range [first, last] of bursts")


def _ranges(bursts: list[int]) -> tuple[Range, ...]:
    """Sorted distinct bursts as ranges of consecutive ones."""
    out: list[Range] = []
    for burst in bursts:
        if out and burst == out[-1][1] + 1:
            out[-1] = (out[-1][0], burst)
        else:
            out.append((burst, burst))
    return tuple(out)


def _merge(ranges: list[Range]) -> tuple[Range, ...]:
    """Ranges, possibly overlapping or adjacent, as sorted disjoint non-adjacent ones."""
    out: list[Range] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return tuple(out)
