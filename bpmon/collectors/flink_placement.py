"""Where a Flink job's subtasks run: task manager and attempt of each, read from the REST API.

Thread dumps are per task manager, and a task thread's name carries its attempt (``#0``); this
is what ties a thread of a dump to one subtask. :meth:`JobPlacement.refresh` reads
``GET /jobs/{id}/vertices/{vertex}`` for every vertex (one request each) before every window, so
a restarted job's new attempts, possibly on other task managers, are followed.
"""

from __future__ import annotations

from collections.abc import Mapping

from bpmon.collectors.flink_plan import FlinkGraph, Placement, placements_of
from bpmon.collectors.flink_rest import FlinkRest
from bpmon.collectors.flink_threads import SubtaskKey
from bpmon.errors import JobError


class JobPlacement:
    """The task manager and attempt of every subtask of ``graph``'s job."""

    def __init__(self, rest: FlinkRest, graph: FlinkGraph) -> None:
        self.rest, self.graph = rest, graph
        self._where: dict[SubtaskKey, Placement] = {}
        self.task_managers: list[str] = []

    def refresh(self) -> None:
        """Read every vertex's subtasks again.

        Raises:
            JobError: a subtask is not running (the job is restarting, failing or finished).
        """
        where: dict[SubtaskKey, Placement] = {}
        for v in self.graph.vertices:
            details = self.rest.get(f"/jobs/{self.graph.job.id}/vertices/{v.id}")
            for index, place in placements_of(details).items():
                where[(v.name, index)] = place
        stopped = sorted(
            f"{n}[{i}] is {p.status}" for (n, i), p in where.items() if p.status != "RUNNING"
        )
        if stopped:
            raise JobError(
                f"job {self.graph.job.name!r} is not running every task: {'; '.join(stopped[:4])}"
            )
        self._where = where
        self.task_managers = sorted({p.task_manager for p in where.values() if p.task_manager})

    def expected(self) -> Mapping[str, Mapping[SubtaskKey, int]]:
        """Per task manager, its subtasks and their attempts."""
        by_tm: dict[str, dict[SubtaskKey, int]] = {}
        for key, place in self._where.items():
            by_tm.setdefault(place.task_manager, {})[key] = place.attempt
        return by_tm

    def of(self, vertex: str, index: int) -> Placement | None:
        """The placement of subtask ``index`` of ``vertex``, None if unknown."""
        return self._where.get((vertex, index))

    def index_of(self, place: Placement | None) -> int | None:
        """The task manager's number (0, 1, ... in id order), as the model numbers them."""
        if place is None or place.task_manager not in self.task_managers:
            return None
        return self.task_managers.index(place.task_manager)
