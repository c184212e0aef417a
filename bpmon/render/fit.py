"""Tables that fit the terminal without breaking a word.

rich shrinks a table that is too wide by narrowing its widest wrappable columns, down to a
character if need be, so at 80 columns words break mid-way ("slow-op / erator"). Here the widths
are chosen before rich sees the table: each column gets at least its longest word (its whole
cell when it must not wrap), the columns a table can spare are dropped, least needed first,
until those minimums fit, and what room is left goes to the columns that would wrap, the least
wanting first. A cell then wraps between words, never inside one. Only when the columns that
must stay cannot show their longest words side by side (a terminal narrower than that) does
rich fold a word, since nothing else can show it.

A surface helper: it imports rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

GAP = 2
"""Columns between two cells (the collapsed padding of the table style below)."""

Cell = str | Text


@dataclass(frozen=True, slots=True)
class Col:
    """A column: its header (``\\n`` stacks it), alignment, whether it wraps, and when it goes.

    ``drop`` 0 means always shown; among the others the highest goes first when the table is
    too wide (the rightmost of equals).
    """

    header: str
    justify: Literal["left", "right"] = "left"
    wrap: bool = True
    drop: int = 0


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _widths(col: Col, cells: Sequence[Cell]) -> tuple[int, int]:
    """The column's least width (its longest word, or whole line when it must not wrap) and
    the width that shows every cell on one line."""
    lines = [ln for c in (col.header, *map(_plain, cells)) for ln in c.splitlines()] or [""]
    natural = max(cell_len(ln) for ln in lines)
    if not col.wrap:
        return natural, natural
    words = [w for ln in lines for w in ln.split()] or [""]
    return max(cell_len(w) for w in words), natural


def kept_columns(cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int) -> list[int]:
    """The indices of the columns shown at ``width``: the droppable ones leave, highest
    ``drop`` first, until every kept column's least width fits."""
    least = [_widths(c, [r[i] for r in rows])[0] for i, c in enumerate(cols)]
    kept = list(range(len(cols)))
    while sum(least[i] for i in kept) + GAP * (len(kept) - 1) > width:
        spare = [i for i in kept if cols[i].drop > 0]
        if not spare:
            break
        kept.remove(max(reversed(spare), key=lambda i: cols[i].drop))
    return kept


def fit_table(
    cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int
) -> tuple[Table, list[Col]]:
    """A table of ``rows`` no wider than ``width``, and the columns it kept (for a legend)."""
    kept = kept_columns(cols, rows, width)
    sizes = [_widths(cols[i], [r[i] for r in rows]) for i in kept]
    widths = [least for least, _ in sizes]
    room = width - sum(widths) - GAP * (len(kept) - 1)
    # the narrowest wants first: small columns show whole, the widest one wraps
    for k in sorted(range(len(kept)), key=lambda k: sizes[k][1] - sizes[k][0]):
        more = max(0, min(room, sizes[k][1] - widths[k]))
        widths[k] += more
        room -= more
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for k, i in enumerate(kept):
        col = cols[i]
        table.add_column(
            col.header,
            justify=col.justify,
            width=max(1, min(widths[k], width)),
            no_wrap=not col.wrap,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    return table, [cols[i] for i in kept]
