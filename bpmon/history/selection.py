"""Which parts of a job-day folder are read: every window once, whatever a crash left behind.

A job-day folder may hold, in each table, parts of single appends, synthetic runs, and compacted
parts that replaced some of them (``compaction.py``). The rule, per folder:

1. Compacted ``subtasks`` parts, largest first, are read unless their windows are already
   covered by those chosen (a part a later compaction merged: replaced, not read).
2. Any other ``subtasks`` part is read unless a chosen compacted part covers its windows
   (replaced, waiting to be deleted).
3. A compacted ``causes`` part counts only once the ``subtasks`` part of the same name exists
   (a compaction renames its ``causes`` part first): without it, it is an unfinished
   compaction, skipped. The counted ones are chosen as in 1.
4. Any other ``causes`` part is replaced when a chosen compacted ``causes`` part covers it, and
   read when the ``subtasks`` part of the same name is read; otherwise it is an unfinished
   append (its ``subtasks`` part is missing), skipped.

A compaction writes its compacted pair before deleting the parts it merged, and merges only
parts that are read, so at every moment each window is read from exactly one part of each
table. A part that shares some windows with a chosen part but is not covered by it cannot come
from bpmon (compactions hold a lock); it is skipped and named, never deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bpmon.history.parts import Part, windows_of
from bpmon.history.windows import Windows

LEFT = "skipped, left as it is"


@dataclass(frozen=True, slots=True)
class Selection:
    """One job-day folder's parts, sorted out.

    Attributes:
        subtasks: the ``subtasks`` parts to read.
        causes: the ``causes`` parts to read.
        replaced: parts covered by a compacted part (never read; compaction deletes them).
        unfinished: compacted ``causes`` parts of a compaction killed before its ``subtasks``
            part (never read; the next compaction deletes them).
        skipped: one line per part skipped for another reason, with the reason.
    """

    subtasks: tuple[Part, ...] = ()
    causes: tuple[Part, ...] = ()
    replaced: tuple[Part, ...] = ()
    unfinished: tuple[Part, ...] = ()
    skipped: tuple[str, ...] = ()

    def covered(self) -> Windows:
        """The windows of the compacted ``subtasks`` parts read."""
        return Windows().union(*(p.windows for p in self.subtasks if p.windows and p.compacted))


def select(pq: Any, subtasks: list[Part], causes: list[Part]) -> Selection:
    """Sort out the parts of one job-day folder (both tables) by the rule above."""
    skipped: list[str] = []
    chosen, replaced, cover = _compacted([p for p in subtasks if p.compacted], skipped)
    plain, covered = _plain(pq, [p for p in subtasks if not p.compacted], cover, skipped)
    read_subtasks = chosen + plain
    compacted_names = {p.name for p in subtasks if p.compacted}
    finished = [p for p in causes if p.compacted and p.name in compacted_names]
    unfinished = [p for p in causes if p.compacted and p.name not in compacted_names]
    skipped += [
        f"{p.path}: an unfinished compaction (its subtasks part is missing); skipped (the "
        "next compaction removes it)"
        for p in unfinished
    ]
    chosen_c, replaced_c, cover_c = _compacted(finished, skipped)
    others, covered_c = _plain(pq, [p for p in causes if not p.compacted], cover_c, skipped)
    read_names = {p.name for p in plain}
    read_causes = chosen_c + [p for p in others if p.name in read_names]
    skipped += [
        f"{p.path}: an unfinished append (its subtasks part is missing); {LEFT} "
        "(`bpmon history import` completes it)"
        for p in others
        if p.name not in read_names
    ]
    return Selection(
        tuple(read_subtasks),
        tuple(read_causes),
        tuple(replaced + covered + replaced_c + covered_c),
        tuple(unfinished),
        tuple(skipped),
    )


def _compacted(parts: Iterable[Part], skipped: list[str]) -> tuple[list[Part], list[Part], Windows]:
    """Compacted parts, largest first: the chosen, the replaced, and the windows chosen."""
    chosen: list[Part] = []
    replaced: list[Part] = []
    cover = Windows()
    for part in sorted(parts, key=lambda p: (-len(p.windows or ()), p.name)):
        windows = part.windows or Windows()
        if cover.covers(windows) and chosen:
            replaced.append(part)
        elif cover.meets(windows):
            skipped.append(_clash(part, chosen, windows))
        else:
            chosen.append(part)
            cover = cover.union(windows)
    return chosen, replaced, cover


def _plain(
    pq: Any, parts: list[Part], cover: Windows, skipped: list[str]
) -> tuple[list[Part], list[Part]]:
    """Parts that are not compacted: those read, and those ``cover`` replaces."""
    if not cover:
        return list(parts), []
    read: list[Part] = []
    covered: list[Part] = []
    for part in parts:
        try:
            windows = windows_of(pq, part)
        except Exception as exc:  # a part whose footer reads but whose columns do not
            skipped.append(f"{part.path}: its run_id and burst columns do not read ({exc}); {LEFT}")
            continue
        if cover.covers(windows):
            covered.append(part)
        elif cover.meets(windows):
            skipped.append(f"{part.path}: holds some windows of a compacted part, not all; {LEFT}")
        else:
            read.append(part)
    return read, covered


def _clash(part: Part, chosen: list[Part], windows: Windows) -> str:
    other = next((p.name for p in chosen if p.windows and p.windows.meets(windows)), "?")
    return f"{part.path}: a compacted part sharing windows with {other}, not covered by it; {LEFT}"
