"""A Flink job's graph as bpmon's model sees it, from the REST documents that describe it.

- ``GET /jobs/overview`` lists the jobs: :func:`pick_job` finds the one to watch by id or name.
- ``GET /jobs/{id}`` names every job vertex (a chain of operators is ONE vertex, named by Flink
  ``"Source: numbers -> parse"``) with its parallelism, its ``maxParallelism`` (its number of key
  groups; Flink 1.13+, FLINK-12607: older versions leave it out) and how many of its tasks are in
  which state, in Flink's topological order; since Flink 1.x it also embeds the plan (below).
- ``GET /jobs/{id}/plan`` gives the edges: each node's ``inputs`` name the upstream vertex, its
  ``ship_strategy`` (Flink's partitioner: ``FORWARD``, ``HASH``, ``REBALANCE``...) and its
  ``exchange`` (the result partition type: ``pipelined_bounded``, ``blocking``, ``hybrid_full``...),
  and its ``description`` lists the chained operators (``"Source: numbers<br/>+- parse<br/>"``).
  Read only where ``GET /jobs/{id}`` does not embed it.
- ``GET /jobs/{id}/vertices/{vertex}`` says where each subtask runs (``taskmanager-id``), its
  state and its attempt, which task threads carry in their names (``"enrich (1/2)#0"``).

**Names.** A vertex is Flink's vertex id inside bpmon (placements, metrics, thread attribution
and edges are keyed by it) and its name in a report. Flink does not make names unique: two
operators called ``.name("work")`` are two vertices named ``work``. The report shows the first
of them, in the order ``GET /jobs/{id}`` lists the vertices (Flink's topological order from the
sources), as ``work``, the second as ``work#2``, the third ``work#3`` (a number a real name
already takes is skipped), so two vertices are never merged, and an edge between them is an
edge, not a self-loop. The order is the job graph's, fixed for the job's life, so the names stay
the same across restarts and rescales. The parallelism is the vertex's own (``GET /jobs/{id}``),
which follows a rescale.

Everything here is a pure function of those documents, so the parsing is tested on recorded
responses of a real cluster (``tests/collectors/flink/fixtures``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bpmon.model.errors import CollectorError, TargetNotFoundError
from bpmon.model.values import Edge

PARTITIONERS = {
    "FORWARD": "forward",
    "HASH": "hash",
    "REBALANCE": "rebalance",
    "BROADCAST": "broadcast",
    "RESCALE": "rescale",
    "GLOBAL": "global",
    "SHUFFLE": "shuffle",
    "CUSTOM": "custom",
}
"""Flink's ship strategies (partitioner names) as bpmon's edges name them."""

EXCHANGES = {
    "pipelined_bounded": "pipelined",
    "pipelined": "pipelined",
    "pipelined_approximate": "pipelined",
    "blocking": "blocking",
    "blocking_persistent": "blocking",
    "hybrid_full": "hybrid-full",
    "hybrid_selective": "hybrid-selective",
}
"""Flink's result partition types (lower case, as the plan writes them) as bpmon's exchanges."""


@dataclass(frozen=True, slots=True)
class JobRef:
    """A job on the cluster: id, name and state (``RUNNING``, ``FINISHED``, ...)."""

    id: str
    name: str
    state: str


@dataclass(frozen=True, slots=True)
class FlinkVertex:
    """One job vertex: Flink's id, its name in reports (unique in the job), its chained
    operators, parallelism, inputs (named by the reports' names) and kind.

    ``task_name`` is Flink's own name, which task threads carry (``"work (1/2)#0"``); it
    differs from ``name`` only for a vertex whose name another vertex has too (``work#2``).
    ``max_parallelism`` is its ``maxParallelism``, the key groups a keyed input is routed by and
    the most subtasks it can have (None where Flink does not say).
    """

    id: str
    name: str
    parallelism: int
    operators: tuple[str, ...]
    inputs: tuple[Edge, ...]
    kind: str | None
    task_name: str = ""
    max_parallelism: int | None = None


@dataclass(frozen=True, slots=True)
class FlinkGraph:
    """A job's vertices, sources first (the plan's order reversed: Flink lists sinks first)."""

    job: JobRef
    vertices: tuple[FlinkVertex, ...]

    def by_id(self, vertex_id: str) -> FlinkVertex:
        """The vertex with Flink id ``vertex_id``; KeyError if none."""
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(vertex_id)

    @property
    def shape(self) -> dict[str, int]:
        """Vertex id -> parallelism: what a rescale changes."""
        return {v.id: v.parallelism for v in self.vertices}


def jobs_of(overview: Mapping[str, Any]) -> list[JobRef]:
    """The jobs of ``GET /jobs/overview``, newest first."""
    rows = sorted(overview.get("jobs") or [], key=lambda j: -int(j.get("start-time") or 0))
    return [JobRef(str(j["jid"]), str(j.get("name", "")), str(j.get("state", ""))) for j in rows]


def pick_job(
    jobs: Sequence[JobRef], wanted: str | None, url: str, transient: Collection[str] = ()
) -> JobRef:
    """The job to watch: ``wanted`` as an id or a name, else the only running job.

    A name shared by several jobs picks the running one (the newest if several run). A job
    named that is on its way to running (restarting, waiting for resources: ``transient``) is
    watched too: its first windows are gaps until it runs.

    Raises:
        TargetNotFoundError: no such job, no running job, or several running and none named.
        CollectorError: the job named has ended (finished, cancelled, failed).
    """
    running = [j for j in jobs if j.state == "RUNNING"]
    listed = _listing(running)
    if wanted is None:
        if len(running) == 1:
            return running[0]
        if not running:
            raise TargetNotFoundError(
                f"no job is running on the Flink cluster at {url}; submit one, then run this again"
            )
        raise TargetNotFoundError(
            f"{len(running)} jobs are running on {url} ({listed}); pass --job ID or --job NAME"
        )
    matches = [j for j in jobs if wanted in (j.id, j.name)]
    if not matches:
        raise TargetNotFoundError(
            f"no job {wanted!r} on the Flink cluster at {url} (running: {listed or 'none'}); "
            "pass --job with the id or name of a running job"
        )
    live = [j for j in matches if j.state == "RUNNING"] or [
        j for j in matches if j.state in transient
    ]
    if live:
        return live[0]
    job = matches[0]
    raise CollectorError(
        f"job {job.name!r} ({job.id}) on {url} is {job.state}, not RUNNING: bpmon watches running "
        f"jobs only (running: {listed or 'none'}); restart it or pass --job with a running one"
    )


def _listing(jobs: Sequence[JobRef]) -> str:
    return ", ".join(f"{j.name!r} ({j.id})" for j in jobs[:5]) + (" ..." if len(jobs) > 5 else "")


def graph_of(
    job: JobRef, details: Mapping[str, Any], plan: Mapping[str, Any] | None = None
) -> FlinkGraph:
    """The job graph from ``GET /jobs/{id}`` (names, parallelism) and its plan (edges): the one
    ``details`` embeds, else ``plan`` (``GET /jobs/{id}/plan``).

    Raises:
        CollectorError: the documents do not describe the same vertices (a job changed between
            the two requests, or not Flink's format).
    """
    rows = [v for v in details.get("vertices") or [] if isinstance(v, dict) and "id" in v]
    names = display_names([(str(v["id"]), str(v.get("name", ""))) for v in rows])
    parallelism = {str(v["id"]): v.get("parallelism") for v in rows}
    key_groups = {str(v["id"]): max_parallelism_of(v) for v in rows}
    nodes = list(((plan_of(details) or plan or {}).get("plan") or {}).get("nodes") or [])
    if not nodes or set(names) != {str(n.get("id")) for n in nodes}:
        raise CollectorError(
            f"the plan of job {job.name!r} ({job.id}) does not match its vertices; "
            "the job may have been restarted: run this again"
        )
    consumed = {str(i["id"]) for n in nodes for i in n.get("inputs") or []}
    task_names = {str(v["id"]): str(v.get("name", "")) for v in rows}
    vertices = []
    for node in reversed(nodes):
        vid = str(node["id"])
        inputs = tuple(
            Edge(
                names[str(i["id"])],
                partitioner(str(i.get("ship_strategy", ""))),
                exchange(str(i.get("exchange", ""))),
            )
            for i in node.get("inputs") or []
        )
        vertices.append(
            FlinkVertex(
                id=vid,
                name=names[vid],
                parallelism=int(parallelism[vid] or node.get("parallelism") or 1),
                operators=chained_operators(str(node.get("description", ""))) or (names[vid],),
                inputs=inputs,
                kind="source" if not inputs else "sink" if vid not in consumed else None,
                task_name=task_names[vid],
                max_parallelism=key_groups[vid],
            )
        )
    return FlinkGraph(job, tuple(_sources_first(vertices)))


def max_parallelism_of(vertex: Mapping[str, Any]) -> int | None:
    """A vertex's ``maxParallelism`` in ``GET /jobs/{id}``: None where it is missing (Flink
    before 1.13) or not a positive whole number (the job-level field says -1 when unset)."""
    value = vertex.get("maxParallelism")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 1 and value == int(value) else None


def plan_of(details: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The plan ``GET /jobs/{id}`` embeds (as ``GET /jobs/{id}/plan`` answers it), None if it
    does not (then the plan is read on its own)."""
    embedded = details.get("plan")
    return {"plan": embedded} if isinstance(embedded, dict) and embedded.get("nodes") else None


def display_names(vertices: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Vertex id -> its name in reports, unique: ``(id, Flink's name)`` in job-graph order; the
    second vertex of a name is ``name#2``, the third ``name#3`` (see the module)."""
    taken = {name for _, name in vertices}
    seen: dict[str, int] = {}
    shown: dict[str, str] = {}
    for vid, name in vertices:
        count = seen[name] = seen.get(name, 0) + 1
        label = name
        while count > 1 and (label := f"{name}#{count}") in taken:
            count += 1
        if label != name:
            seen[name] = count
            taken.add(label)
        shown[vid] = label
    return shown


def _sources_first(vertices: list[FlinkVertex]) -> list[FlinkVertex]:
    """Vertices ordered so that every vertex comes after its inputs (stable otherwise)."""
    done: set[str] = set()
    ordered: list[FlinkVertex] = []
    pending = list(vertices)
    while pending:
        ready = [v for v in pending if all(e.source in done for e in v.inputs)] or pending[:1]
        for v in ready:
            ordered.append(v)
            done.add(v.name)
            pending.remove(v)
    return ordered


def partitioner(ship_strategy: str) -> str:
    """A ship strategy as bpmon's partitioner name (an unknown one lower-cased)."""
    key = ship_strategy.strip().upper()
    return PARTITIONERS.get(key, key.lower() or "forward")


def exchange(result_partition_type: str) -> str:
    """A result partition type as bpmon's exchange name (an unknown one kept, lower-cased)."""
    key = result_partition_type.strip().lower()
    return EXCHANGES.get(key, key or "pipelined")


def chained_operators(description: str) -> tuple[str, ...]:
    """The operator names of a plan node's description: ``"A<br/>+- B<br/>"`` -> ``(A, B)``."""
    parts = re.split(r"<br\s*/?>", description)
    names = (html.unescape(re.sub(r"^[\s:+\-]*", "", p)).strip() for p in parts)
    return tuple(n for n in names if n)


@dataclass(frozen=True, slots=True)
class SubtaskPlacement:
    """Where one subtask runs: the task manager's id and the attempt (thread name's ``#n``),
    its status, for how long it has been running and how long in its status now (seconds; None
    if not known: Flink's ``status-duration``)."""

    task_manager: str
    attempt: int
    status: str
    running_s: float | None = None
    in_status_s: float | None = None


def placements_of(vertex_details: Mapping[str, Any]) -> dict[int, SubtaskPlacement]:
    """Subtask index -> placement, from ``GET /jobs/{id}/vertices/{vertex}``."""
    return {
        int(s["subtask"]): SubtaskPlacement(
            str(s.get("taskmanager-id", "")),
            int(s.get("attempt") or 0),
            str(s.get("status", "")),
            _seconds_in(s, "RUNNING"),
            _seconds_in(s, str(s.get("status", ""))),
        )
        for s in vertex_details.get("subtasks") or []
    }


def _seconds_in(subtask: Mapping[str, Any], status: str) -> float | None:
    """How long ``subtask`` has been in ``status`` (Flink's ``status-duration``, ms)."""
    spent = (subtask.get("status-duration") or {}).get(status)
    return float(spent) / 1000 if isinstance(spent, int | float) and spent >= 0 else None
