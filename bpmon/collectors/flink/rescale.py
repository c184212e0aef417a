"""A Flink job at the parallelism bpmon recommends: asked of the adaptive scheduler, or awaited.

``bpmon monitor --flink URL --verify`` checks a recommendation on the cluster itself. bpmon
submits nothing: where the cluster runs Flink's adaptive scheduler (``jobmanager.scheduler:
adaptive``), whose ``GET /jobs/{id}/resource-requirements`` answers, it raises the upper bound of
each recommended vertex's parallelism with ``PUT`` on the same endpoint (Flink's own way to rescale
a running job in place, FLIP-291) and waits for the job to run at it. Elsewhere the user rescales
the job (a savepoint and a restart with the new parallelism, which gives a new job id under the
same name) and bpmon waits for a running job of that name at the new shape.

The rescale is done when every changed vertex runs at its parallelism, every subtask is RUNNING,
and each has its metrics in the REST metric store. A cluster without the slots for it never gets
there: the wait ends after its timeout with a line saying what Flink runs and what was asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bpmon.collectors.flink.plan import JobRef, display_names, jobs_of, pick_job
from bpmon.collectors.flink.rest import FlinkRest, NotFoundError
from bpmon.model.errors import CollectorError

POLL_S = 1.0
"""How often the job's shape is read while waiting."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What runs now: vertex name -> (parallelism, subtasks RUNNING)."""

    vertices: Mapping[str, tuple[int, int]]

    def meets(self, wanted: Mapping[str, int]) -> bool:
        """Every vertex of ``wanted`` runs at its parallelism, every subtask RUNNING."""
        return all(
            name in self.vertices and self.vertices[name] == (parallelism, parallelism)
            for name, parallelism in wanted.items()
        )

    def describe(self, wanted: Mapping[str, int]) -> str:
        """``enrich at 4 (4 running) of the 7 asked``, for each changed vertex."""
        parts = []
        for name, parallelism in wanted.items():
            now, running = self.vertices.get(name, (0, 0))
            parts.append(f"{name} at {now} ({running} running) of the {parallelism} asked")
        return ", ".join(parts)


def shape_of(details: Mapping[str, Any]) -> Shape:
    """The shape of ``GET /jobs/{id}``: each vertex's parallelism and RUNNING subtasks, by its
    name in reports (``work#2`` for the second vertex named ``work``)."""
    rows = _rows(details)
    names = display_names([(str(v["id"]), str(v.get("name", ""))) for v in rows])
    shape = {}
    for v in rows:
        tasks = v.get("tasks") or {}
        running = int(tasks.get("RUNNING", tasks.get("running", 0)) or 0)
        shape[names[str(v["id"])]] = (int(v.get("parallelism", 0)), running)
    return Shape(shape)


def vertex_ids(details: Mapping[str, Any]) -> dict[str, str]:
    """Each vertex's name in reports -> its Flink id, from ``GET /jobs/{id}``."""
    rows = _rows(details)
    names = display_names([(str(v["id"]), str(v.get("name", ""))) for v in rows])
    return {names[str(v["id"])]: str(v["id"]) for v in rows}


def _rows(details: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [v for v in details.get("vertices") or [] if isinstance(v, dict) and "id" in v]


class FlinkRescale:
    """Bring the job ``job`` of the cluster at ``url`` to a parallelism per vertex.

    Args:
        url: the JobManager's REST address.
        job: the job's id or name, as ``bpmon monitor --job`` takes it (None: the only running).
    """

    def __init__(
        self,
        url: str,
        job: str | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rest = FlinkRest(url)
        self._clock, self._sleep = clock, sleep
        self.job: JobRef = pick_job(jobs_of(self.rest.get("/jobs/overview")), job, self.rest.url)

    def adaptive(self) -> bool:
        """Whether the cluster can rescale the job in place (Flink's adaptive scheduler)."""
        try:
            self.rest.get(f"/jobs/{self.job.id}/resource-requirements", retry=False)
        except (NotFoundError, CollectorError):
            return False
        return True

    def check_slots(self, wanted: Mapping[str, int]) -> None:
        """CollectorError at once when the cluster has fewer task slots than the widest vertex
        asked for needs (with slot sharing, a job needs as many slots as its widest vertex)."""
        total = int(self.rest.get("/overview").get("slots-total") or 0)
        widest = max(wanted.values(), default=0)
        if total and widest > total:
            name = max(wanted, key=lambda n: wanted[n])
            raise CollectorError(
                f"{name} at {widest} needs {widest} task slots and the cluster has {total}: add "
                "TaskManagers (or taskmanager.numberOfTaskSlots), then run --verify again"
            )

    def request(self, wanted: Mapping[str, int]) -> None:
        """Ask the adaptive scheduler for ``wanted`` (vertex name -> parallelism).

        Raises:
            CollectorError: a vertex of that name is not in the job, or Flink refused.
        """
        path = f"/jobs/{self.job.id}/resource-requirements"
        requirements = self.rest.get(path)
        ids = vertex_ids(self.rest.get(f"/jobs/{self.job.id}"))
        for name, parallelism in wanted.items():
            if name not in ids or ids[name] not in requirements:
                raise CollectorError(
                    f"the job {self.job.name!r} has no vertex {name!r} to rescale "
                    f"(its vertices: {', '.join(ids)})"
                )
            requirements[ids[name]]["parallelism"] = {"lowerBound": 1, "upperBound": parallelism}
        self.rest.put_json(path, requirements)

    def wait(self, wanted: Mapping[str, int], timeout_s: float) -> JobRef:
        """The job (the same, or a running one of its name: a restart) once it runs at
        ``wanted``; CollectorError after ``timeout_s`` saying what runs instead."""
        deadline = self._clock() + timeout_s
        shape = Shape({})
        while True:
            for candidate in self._candidates():
                shape = shape_of(self.rest.get(f"/jobs/{candidate.id}"))
                if shape.meets(wanted) and self._has_metrics(candidate, wanted):
                    self.job = candidate
                    return candidate
            if self._clock() >= deadline:
                raise CollectorError(
                    f"the job {self.job.name!r} did not run at the recommended parallelism within "
                    f"{timeout_s:g} s: {shape.describe(wanted)}; check the cluster's free task "
                    "slots (a rescale needs one per subtask), then try again"
                )
            self._sleep(POLL_S)

    def _candidates(self) -> list[JobRef]:
        jobs = jobs_of(self.rest.get("/jobs/overview"))
        same = [j for j in jobs if j.id == self.job.id and j.state == "RUNNING"]
        return same + [
            j for j in jobs if j.name == self.job.name and j.state == "RUNNING" and j not in same
        ]

    def _has_metrics(self, job: JobRef, wanted: Mapping[str, int]) -> bool:
        """Every subtask of the changed vertices has metrics in the REST store (else the next
        window would read the new subtasks as unknown)."""
        details = self.rest.get(f"/jobs/{job.id}")
        names = {vid: name for name, vid in vertex_ids(details).items()}
        for v in _rows(details):
            if names[str(v["id"])] not in wanted:
                continue
            listed = self.rest.get(f"/jobs/{job.id}/vertices/{v['id']}/metrics")
            have = {str(m.get("id", "")).split(".", 1)[0] for m in listed}
            if not all(str(i) in have for i in range(int(v.get("parallelism", 0)))):
                return False
        return True
