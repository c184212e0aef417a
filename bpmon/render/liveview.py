"""The live view of a running watch: one table of every vertex, redrawn from the service's
:class:`~bpmon.model.events.LiveSnapshot` events.

It draws on the thread that consumes the events, never on the sampler's (the service samples on
a thread of its own), and only when a snapshot arrives (about four times a second): rich's own
refresh thread is off. Off a terminal (a log, a pipe) it draws nothing. A surface: it imports rich.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from bpmon.model.events import LiveSnapshot
from bpmon.render.report import vertex_table


class LiveView:
    """A context manager that shows the latest snapshot of a watch titled ``title``."""

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self._live: Live | None = None

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live = Live(
                Text(f"{self.title}: starting", style="dim"),
                console=self.console,
                auto_refresh=False,
                transient=True,
            )
            self._live.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(kind, exc, tb)
            self._live = None

    def update(self, snapshot: LiveSnapshot) -> None:
        """Redraw with ``snapshot`` (nothing happens off a terminal)."""
        if self._live is not None:
            self._live.update(live_table(self.title, snapshot, self.console.width), refresh=True)


def live_table(title: str, snapshot: LiveSnapshot, width: int) -> Group:
    """The vertex table of one snapshot fitted to ``width`` columns (the report's columns, one
    row per vertex), with the phase (and sampling progress) beneath it."""
    phase = snapshot.phase
    if phase == "settling":
        phase = "settling: backpressure still building"
    if snapshot.sampling is not None:
        s = snapshot.sampling
        phase = f"sampling burst {s.burst + 1}: {s.done}/{s.samples} samples"
    return Group(
        Text(f"{title} — {snapshot.elapsed_s:4.1f} s", style="italic"),
        vertex_table(snapshot.vertices, width, subtasks=False),
        Text(phase, style="dim"),
    )
