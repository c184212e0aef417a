"""Evidence lines that carry the figures they state.

A root cause's evidence is read by a person (the words) and checked by the tests (the figures
against the report's own fields). So a line is built from parts, words and
:class:`EvidenceFigure`\\ s, and its text is the parts joined: the number shown is the figure's
``shown``, formatted from its ``value`` by one of this module's constructors, so the text and the
figure it carries cannot disagree, and a rule that writes a number as words instead of as a figure
is caught by the test that finds no figure for it.

Only the rules build figures. The JSON report carries the text alone (``docs/report.md``:
``evidence`` is a list of strings), so a report read back from JSON has lines without figures
(:meth:`EvidenceLine.of_text`); two lines are equal when their texts are. Model layer: stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from bpmon.model import numbers

FigureKind = Literal[
    "subtask",  # a subtask index, as in ``enrich[3]``
    "parallelism",  # a vertex's subtasks, as in ``all 3 subtasks``
    "busy",  # busy share (the table's) of ``subtasks``, or of the vertex when there are none
    "busy-least",  # the least busy share of ``subtasks``
    "busy-most",  # the most busy share of ``subtasks``
    "busy-sampled",  # the sampled busy share of one subtask (the table shows the time's)
    "idle",  # idle share of the vertex (or of its one subtask in ``subtasks``)
    "backpressure",  # backpressured share (ratio) of the vertex, or of one subtask
    "out-pool",  # output pool usage of the vertex
    "in-pool",  # input pool usage of the vertex
    "records-share",  # share of the vertex's records in that ``subtasks`` receive
    "fair-share",  # ``len(subtasks) / parallelism``
    "hash-share",  # share of the vertex's records its hottest subtask receives
    "key-share",  # the part of that share one key holds (no parallelism splits it)
    "time-per-record",  # busy time per record of ``subtasks`` (ms; inf: busy without records)
    "slower",  # time per record of ``subtasks`` over that of the others
    "records-factor",  # records per subtask of ``subtasks`` over those of the others
    "spill",  # bytes/s ``subtasks`` spill to disk
    "capacity",  # records/s per subtask of ``subtasks`` at 100% busy
    "capacity-others",  # the same, of the vertex's subtasks not in ``subtasks``
    "offered",  # records/s the vertex would be offered
    "offered-per-subtask",  # records/s each of ``subtasks`` would be offered
    "emitted",  # records/s a source emits
    "delivered",  # records/s that reach the vertex now (its records in): the least it is offered
    "lag-growth",  # records/s a source's pendingRecords grow by
    "backlog-records",  # records the vertex's sources owe (pendingRecords), carried to it
    "catch-up",  # records/s more that drain them within [sizing] catch_up_s
    "drain-minutes",  # minutes the backlog takes to drain at the recommended parallelism
    "needed",  # the parallelism that would take the offered rate
    "skew-needed",  # the parallelism the share model asks of a skewed vertex, past its bound
    "skew-bound",  # the most bpmon recommends for it (four times today's, 16 at least, key groups)
    "utilisation",  # the utilisation at that parallelism
    "backlog",  # buffers a channel holds at its producer (one subtask in ``subtasks``)
    "no-credit",  # share of a channel's readings with a backlog and no credit
    "channels",  # how many channels into the vertex show it
    "chain-share",  # share of a chain's busy samples on one operator
    "chain-samples",  # busy samples counted by chain position
    "window",  # the window's length (s)
    "region",  # a pipelined region's number
    "waiting-subtasks",  # subtasks waiting to be deployed
    "waited",  # seconds they waited
    "slots-needed",  # slots a region needs
    "slots-missing",  # slots it needs that are not free
    "slots-total",  # slots in the cluster
    "restarts",  # times the scheduler gave up waiting
    "spilled-mb",  # MB/s a vertex's partitions spill
    "read-back-mb",  # MB/s read back from the spill
    "disk-ms",  # ms per second on the disk
]
FigureUnit = Literal[
    "ratio", "%", "records/s", "bytes/s", "MB/s", "ms", "ms/s", "s", "min", "x", "buffers", "count"
]


@dataclass(frozen=True, slots=True)
class EvidenceFigure:
    """One figure an evidence line states: what it is, of which vertex and subtasks, its value.

    Attributes:
        what: what the figure is (:data:`FigureKind`; its comment says what it describes).
        value: the value the rule computed, unrounded (``inf`` for an unbounded one); a share
            or a ratio as a fraction, a time per record in ms.
        unit: the unit of ``value``.
        shown: how the line writes it (formatted from ``value`` by this module).
        vertex: the vertex it describes (the report's name), when it describes one.
        subtasks: the subtasks of ``vertex`` it describes (empty: the vertex as a whole).
    """

    what: FigureKind
    value: float
    unit: FigureUnit
    shown: str
    vertex: str = ""
    subtasks: tuple[int, ...] = ()


EvidencePart = str | EvidenceFigure


@dataclass(frozen=True, slots=True, eq=False)
class EvidenceLine:
    """One line of a root cause's evidence: words and the figures it states, in order.

    ``text`` is the parts joined, each figure written as its ``shown``. Equality and hashing go
    by the text, so a report read back from JSON (lines without figures) equals the one written.
    """

    parts: tuple[EvidencePart, ...]

    @classmethod
    def of_text(cls, text: str) -> EvidenceLine:
        """A line known only by its text (read back from JSON): it carries no figures."""
        return cls((text,))

    @property
    def text(self) -> str:
        """The line as a person reads it."""
        return "".join(p if isinstance(p, str) else p.shown for p in self.parts)

    @property
    def figures(self) -> tuple[EvidenceFigure, ...]:
        """The figures the line states, in the order it states them."""
        return tuple(p for p in self.parts if isinstance(p, EvidenceFigure))

    @property
    def words(self) -> tuple[str, ...]:
        """The parts that are not figures."""
        return tuple(p for p in self.parts if isinstance(p, str))

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EvidenceLine) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def line(*parts: EvidencePart | Iterable[EvidencePart]) -> EvidenceLine:
    """An evidence line from words, figures and sequences of them (:func:`subtasks`), in order."""
    flat: list[EvidencePart] = []
    for part in parts:
        if isinstance(part, str | EvidenceFigure):
            flat.append(part)
        else:
            flat.extend(part)
    return EvidenceLine(tuple(flat))


def subtasks(vertex: str, indices: Sequence[int]) -> tuple[EvidencePart, ...]:
    """``enrich[0]`` or ``enrich[0,2]``, each index a ``subtask`` figure."""
    parts: list[EvidencePart] = [f"{vertex}["]
    for n, i in enumerate(indices):
        if n:
            parts.append(",")
        parts.append(EvidenceFigure("subtask", float(i), "count", str(i), vertex, (i,)))
    return (*parts, "]")


def table_percent(value: float) -> str:
    """A share as a whole percentage rounded as the report table's two decimals are (0.945 is
    shown 0.94 there, so ``94%``): the text quotes the very figure the table shows."""
    return f"{round(value, 2) * 100:.0f}%"


def percent(
    what: FigureKind, value: float, vertex: str = "", of: Iterable[int] = ()
) -> EvidenceFigure:
    """A share as :func:`table_percent` writes it."""
    return EvidenceFigure(what, value, "%", table_percent(value), vertex, tuple(of))


def rounded_percent(
    what: FigureKind, value: float, vertex: str = "", of: Iterable[int] = ()
) -> EvidenceFigure:
    """A share as a whole percentage (Python's ``.0%``), for shares the table does not show."""
    return EvidenceFigure(what, value, "%", f"{value:.0%}", vertex, tuple(of))


def ratio(
    what: FigureKind, value: float, vertex: str = "", of: Iterable[int] = ()
) -> EvidenceFigure:
    """A ratio with two decimals (``0.80``), as the report's table shows it (``numbers.ratio``)."""
    return EvidenceFigure(what, value, "ratio", numbers.ratio(value), vertex, tuple(of))


def whole(
    what: FigureKind,
    value: float,
    unit: FigureUnit = "records/s",
    vertex: str = "",
    of: Iterable[int] = (),
) -> EvidenceFigure:
    """A rate (or any amount) whole, thousands grouped (``12,345``)."""
    return EvidenceFigure(what, value, unit, f"{value:,.0f}", vertex, tuple(of))


def decimal(
    what: FigureKind,
    value: float,
    unit: FigureUnit,
    digits: int,
    vertex: str = "",
    of: Iterable[int] = (),
) -> EvidenceFigure:
    """An amount with ``digits`` decimals (``12.0`` s, ``1.5`` buffers)."""
    return EvidenceFigure(what, value, unit, f"{value:.{digits}f}", vertex, tuple(of))


def count(what: FigureKind, value: int, vertex: str = "", of: Iterable[int] = ()) -> EvidenceFigure:
    """A whole number of things (subtasks, slots, channels)."""
    return EvidenceFigure(what, float(value), "count", str(value), vertex, tuple(of))


def milliseconds(
    what: FigureKind, seconds: float, vertex: str = "", of: Iterable[int] = ()
) -> EvidenceFigure:
    """A time per record in ms (``1.50 ms``), or ``an unbounded time`` (busy, no records)."""
    ms = seconds * 1000
    shown = "an unbounded time" if math.isinf(ms) else f"{ms:.2f} ms"
    return EvidenceFigure(what, ms, "ms", shown, vertex, tuple(of))


def times(
    what: FigureKind, value: float, vertex: str = "", of: Iterable[int] = ()
) -> EvidenceFigure:
    """A factor with one decimal (``2.5``), or ``many`` when the other side is 0 (``inf``)."""
    shown = "many" if math.isinf(value) else f"{value:.1f}"
    return EvidenceFigure(what, value, "x", shown, vertex, tuple(of))
