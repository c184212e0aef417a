"""The watched Flink job as the cluster shows it now: its state, graph, placement, metric names.

A watch lasts weeks and the job changes under it: it fails over (new attempts, maybe on another
TaskManager), it is rescaled (the adaptive scheduler's ``PUT /jobs/{id}/resource-requirements``:
same vertices, other parallelism), a bounded source finishes. :meth:`WatchedJob.refresh` reads it
again at the start of every window, as cheaply as that can be done:

- ``GET /jobs/{id}/status`` (live; ``GET /jobs/{id}`` is served from a cache Flink refreshes
  every ``web.refresh-interval``, 3 s by default, and says RUNNING for a moment after a failover
  began; Flink 1.13 and 1.14 have no ``/status``, and their details' state is read instead);
- ``GET /jobs/{id}``: state, vertices, parallelism and task states, and the plan embedded;
  ``GET /jobs/{id}/plan`` only when the parallelism changed and the plan is not embedded;
- ``GET /jobs/{id}/vertices/{v}`` per vertex that still runs: where its subtasks run;
- a vertex's metric list only when the vertex is new to the watch or its parallelism changed.

A change is committed only once the whole job was read, and says what it was: a ``rescaled``
finding (``enrich: parallelism 2 → 3``) in the next window, a ``finished`` finding in every
window that leaves finished subtasks out. Anything not readable now is an
:class:`~bpmon.model.errors.UnavailableError` (:mod:`~bpmon.collectors.flink.status` says which
states).

:meth:`WatchedJob.check` is the state alone, read at most once per ``max_age_s`` (the service asks
between bursts every quarter second or so; Flink's answer is reused in between).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bpmon.collectors.flink.metrics import MetricNames, resolve_names
from bpmon.collectors.flink.placement import JobPlacement, read_placement, slot_failures
from bpmon.collectors.flink.plan import FlinkGraph, FlinkVertex, JobRef, graph_of, plan_of
from bpmon.collectors.flink.rest import FlinkRest, NotFoundError
from bpmon.collectors.flink.status import root_exception, state_error, tasks_error
from bpmon.model.errors import BpmonError, CollectorError, JobError, UnavailableError
from bpmon.model.values import Finding

METRICS_STALL = (
    "Flink's metric fetcher refreshes every metrics.fetcher.update-interval, and after a "
    "TaskManager was lost it can stall for up to web.timeout (10 min by default)"
)
"""Why a vertex of a running job may show no metrics yet."""
RESTARTS = frozenset({"RESTARTING", "FAILING"})
"""Job states of a restart loop between its attempts (while an attempt waits, the job is RUNNING
and its SCHEDULED subtasks are read by :func:`read_placement` itself)."""
SLOT_LOOP = 2
"""Failures in a row for want of slots that make a restarting job one short of slots (one is a
failover that may find its slots on the next attempt)."""


class WatchedJob:
    """One job of the cluster behind ``rest``, re-read window after window.

    Args:
        rest: the cluster's client.
        graph: the job's graph as first read.
        clock: monotonic seconds (tests inject one).
        sleep: waits between polls for a new job's first metrics.
        version: the cluster's Flink version, for messages.
    """

    def __init__(
        self,
        rest: FlinkRest,
        graph: FlinkGraph,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        version: str = "",
    ) -> None:
        self.rest, self.graph, self.version = rest, graph, version
        self.placement = JobPlacement(graph, {})
        self.names: dict[str, MetricNames] = {}
        self._clock, self._sleep = clock, sleep
        self._state: tuple[float, BpmonError | None] | None = None
        self._status_endpoint = True
        self.slot_loop = 0
        """Failures in a row for want of slots, while the job restarts over them (else 0)."""

    @property
    def ref(self) -> JobRef:
        """The job's id and name."""
        return self.graph.job

    @property
    def label(self) -> str:
        """``'name' (id)``, as every message names the job."""
        return f"{self.ref.name!r} ({self.ref.id})"

    # -- state ---------------------------------------------------------------------------------

    def check(self, max_age_s: float = 0.0) -> None:
        """Raise what the job's state says (nothing while it runs), from a reading at most
        ``max_age_s`` old (0: read it now).

        Raises:
            UnavailableError: not running for now, or Flink did not answer.
            JobOverError: cancelled or finished.
            JobError: failed, or no longer known to the cluster.
        """
        now = self._clock()
        if self._state is None or now - self._state[0] >= max_age_s:
            self._state = (now, self._read_state())
        if self._state[1] is not None:
            raise self._state[1]

    def _read_state(self) -> BpmonError | None:
        try:
            state = self._state_now()
        except NotFoundError:
            return JobError(
                f"job {self.label} is no longer on the Flink cluster at {self.rest.url} (its "
                "JobManager restarted without high availability, or the job was removed)"
            )
        except UnavailableError as err:
            return err
        error = state_error(self.label, state, self._failure() if state == "FAILED" else None)
        self.slot_loop = 0
        if state in RESTARTS and isinstance(error, UnavailableError):
            # a failover is waited through; a job restarting over and over because its slots
            # never come is a job short of slots, and is watched as one
            loop = slot_failures(self.rest, self.ref.id)
            if loop >= SLOT_LOOP:
                self.slot_loop = loop
                return None
        return error

    def _state_now(self) -> str:
        """The job's state: ``GET /jobs/{id}/status`` (Flink 1.15+), else its details' state."""
        if self._status_endpoint:
            try:
                answer = self.rest.get(f"/jobs/{self.ref.id}/status")
                return str(answer.get("status", "")) if isinstance(answer, dict) else ""
            except NotFoundError:
                self._status_endpoint = False  # Flink 1.13 and 1.14 have none; or the job is gone
        answer = self.rest.get(f"/jobs/{self.ref.id}")
        return str(answer.get("state", "")) if isinstance(answer, dict) else ""

    def _failure(self) -> str | None:
        """The failed job's root exception, best effort (one attempt, no error of its own)."""
        try:
            answer = self.rest.get(f"/jobs/{self.ref.id}/exceptions", retry=False)
        except BpmonError:
            return None
        return root_exception(answer) if isinstance(answer, dict) else None

    # -- the job now ---------------------------------------------------------------------------

    def refresh(self, metrics_wait_s: float = 0.0) -> list[Finding]:
        """Read the job again (see the module) and commit what changed; the findings to report.

        Args:
            metrics_wait_s: how long a vertex without metrics is waited for (a job just
                submitted); after that it is a :class:`~bpmon.model.errors.CollectorError` naming
                the fix. 0: it is an :class:`~bpmon.model.errors.UnavailableError` at once.

        Raises:
            UnavailableError: the job is not readable now (restarting, rescaling, Flink busy).
            JobOverError, JobError: as :meth:`check`.
        """
        self.check()
        details = self._details()
        error = state_error(self.label, str(details.get("state", ""))) or tasks_error(
            self.label, details.get("vertices") or []
        )
        if error is not None and not (self.slot_loop and isinstance(error, UnavailableError)):
            raise error
        graph = self._graph(details)
        placement = read_placement(
            self.rest, graph, _finished_vertices(details), slot_loop=self.slot_loop
        )
        names = self._names(graph, placement, metrics_wait_s)
        notes = [*rescaled(self.graph, graph), *finished(graph, placement)]
        self.graph, self.placement, self.names = graph, placement, names
        return notes

    def _details(self) -> Mapping[str, Any]:
        try:
            details = self.rest.get(f"/jobs/{self.ref.id}")
        except NotFoundError:
            raise UnavailableError(f"job {self.label}: its details are not found now") from None
        if not isinstance(details, dict):
            raise CollectorError(f"GET /jobs/{self.ref.id} on {self.rest.url} is not a job")
        return details

    def _graph(self, details: Mapping[str, Any]) -> FlinkGraph:
        """The graph again when the parallelism changed (the plan read only if not embedded)."""
        shape = {str(v.get("id")): v.get("parallelism") for v in details.get("vertices") or []}
        if shape == self.graph.shape:
            return self.graph
        plan = None if plan_of(details) else self.rest.get(f"/jobs/{self.ref.id}/plan")
        try:
            return graph_of(self.ref, details, plan)
        except CollectorError as err:
            raise UnavailableError(str(err)) from None

    def _names(
        self, graph: FlinkGraph, placement: JobPlacement, wait_s: float
    ) -> dict[str, MetricNames]:
        """The metric names of every running vertex: kept, or resolved for a vertex new to the
        watch or of another parallelism than before."""
        before = self.graph.shape
        names: dict[str, MetricNames] = {}
        for v in graph.vertices:
            if not placement.running(v.id):
                continue
            known = self.names.get(v.id)
            same = known is not None and before.get(v.id) == v.parallelism
            names[v.id] = known if known is not None and same else self._resolve(v, wait_s)
        return names

    def _resolve(self, vertex: FlinkVertex, wait_s: float) -> MetricNames:
        deadline = self._clock() + wait_s
        path = f"/jobs/{self.ref.id}/vertices/{vertex.id}/metrics"
        while True:
            listed = self.rest.get(path)
            ids = [str(m["id"]) for m in listed or [] if isinstance(m, dict) and "id" in m]
            if ids:
                where = f"Flink {self.version} at {self.rest.url}".replace("  ", " ")
                return resolve_names(ids, vertex.name, where)
            if self._clock() >= deadline:
                break
            self._sleep(0.5)
        if wait_s > 0:
            raise CollectorError(
                f"Flink at {self.rest.url} shows no metrics for vertex {vertex.name!r} after "
                f"{wait_s:g} s; check metrics.fetcher.update-interval and the task managers' "
                "logs, then run this again"
            )
        raise UnavailableError(
            f"Flink at {self.rest.url} has no metrics yet for vertex {vertex.name!r} of job "
            f"{self.label}: {METRICS_STALL}"
        )


def _finished_vertices(details: Mapping[str, Any]) -> frozenset[str]:
    """The ids of the vertices every task of which FINISHED (their placement is not read)."""
    done = set()
    for v in details.get("vertices") or []:
        tasks = {k: n for k, n in (v.get("tasks") or {}).items() if isinstance(n, int) and n}
        if tasks and set(tasks) == {"FINISHED"}:
            done.add(str(v.get("id")))
    return frozenset(done)


def rescaled(before: FlinkGraph, after: FlinkGraph) -> list[Finding]:
    """A ``rescaled`` finding per vertex whose parallelism changed from ``before``."""
    old = before.shape
    return [
        Finding("rescaled", v.name, f"{v.name}: parallelism {old[v.id]} → {v.parallelism}")
        for v in after.vertices
        if v.id in old and old[v.id] != v.parallelism
    ]


def finished(graph: FlinkGraph, placement: JobPlacement) -> list[Finding]:
    """A ``finished`` finding per vertex with FINISHED subtasks, left out of the window."""
    notes = []
    for v in graph.vertices:
        done = sorted(i for (vid, i) in placement.finished if vid == v.id)
        if not done:
            continue
        which = (
            f"all {v.parallelism} subtask(s) FINISHED"
            if len(done) == v.parallelism
            else f"subtask(s) {_indices(done)} of {v.parallelism} FINISHED"
        )
        notes.append(
            Finding(
                "finished",
                v.name,
                f"{v.name}: {which} (a bounded input read to its end); left out of the window",
            )
        )
    return notes


def _indices(indices: Iterable[int]) -> str:
    return ", ".join(str(i) for i in indices)
