"""A Flink job's state as a watch reads it: observe it, wait for it, or end.

Flink's job states (``JobStatus``, the same from 1.13 to 2.3) sort into three, and each gives
the watch one of :mod:`bpmon.model.errors`' answers:

- ``RUNNING``: a window can be read.
- On the way somewhere, so **wait** (:class:`~bpmon.model.errors.UnavailableError`; the watch waits
with backoff, tries again and says how long the gap was): ``INITIALIZING`` and ``CREATED`` (a job
being set up; with the adaptive scheduler ``CREATED`` is also "waiting for resources", after a
TaskManager was lost or while it rescales), ``RESTARTING`` and ``FAILING`` (a failover: it runs
again, or ends ``FAILED``), ``RECONCILING`` (a new JobManager taking over running tasks),
``CANCELLING`` (the watch ends on the final ``CANCELED``, or on ``FAILED`` if cancelling fails) and
``SUSPENDED``. Flink calls ``SUSPENDED`` *locally* terminal: this JobManager lost its leadership
and, with high availability, the next leader recovers the job under the same id; without it, the
address stops answering, which is a gap too.
- Globally terminal, so **end**: ``CANCELED`` and ``FINISHED``
  (:class:`~bpmon.model.errors.JobOverError`: the watch ends ``ended``; a stop with a savepoint ends
  ``FINISHED``), ``FAILED`` (:class:`~bpmon.model.errors.JobError`: the watch ends ``failed``, with
  Flink's root exception when it gives one). A job the cluster no longer knows (404: a
  JobManager restarted without high availability lost it) ends the watch ``failed`` as well.

A ``RUNNING`` job is not yet a readable one: after a restart or a rescale its tasks are
``SCHEDULED``, ``DEPLOYING`` or ``INITIALIZING`` for seconds while the job already reads
``RUNNING`` (seen on Flink 2.3's adaptive scheduler), and ``CANCELING`` or ``FAILED`` tasks
announce a failover. Only ``RUNNING`` and ``FINISHED`` tasks (a bounded source that has read
everything) can be watched: anything else is a wait, so a window is never half-read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bpmon.model.errors import BpmonError, JobError, JobOverError, UnavailableError
from bpmon.model.signals import WAITING_STATES

WAITING = {
    "INITIALIZING": "is INITIALIZING (being set up)",
    "CREATED": "is CREATED (waiting for resources)",
    "RESTARTING": "is RESTARTING (a failover)",
    "FAILING": "is FAILING (it restarts or fails)",
    "RECONCILING": "is RECONCILING (a new JobManager takes over)",
    "CANCELLING": "is CANCELLING",
    "SUSPENDED": "is SUSPENDED (its JobManager lost leadership; a new leader recovers it)",
}
"""The job states a watch waits through, and how its gap says them."""

ENDED = {
    "CANCELED": "was CANCELED",
    "FINISHED": "FINISHED (its input ended, or it was stopped with a savepoint)",
}
"""The job states that end a watch ``ended``."""

TASKS_OK = frozenset({"RUNNING", "FINISHED"})
"""The task states a window can be read with (FINISHED subtasks are left out of it)."""


def state_error(job: str, state: str, failure: str | None = None) -> BpmonError | None:
    """What a watch does with ``job`` (``'name' (id)``) in ``state``: None to go on, else the
    error to raise. ``failure``: Flink's root exception, for a FAILED job."""
    if state == "RUNNING":
        return None
    if state in WAITING:
        return UnavailableError(f"job {job} {WAITING[state]}")
    if state in ENDED:
        return JobOverError(f"job {job} {ENDED[state]}")
    if state == "FAILED":
        return JobError(f"job {job} FAILED" + (f": {failure}" if failure else ""))
    return UnavailableError(f"job {job} is {state or 'in no state Flink names'}")


def tasks_error(job: str, vertices: list[Mapping[str, Any]]) -> UnavailableError | None:
    """None when every task of ``GET /jobs/{id}``'s ``vertices`` is RUNNING, FINISHED or waiting
    to be deployed (CREATED, SCHEDULED, DEPLOYING: how long, each subtask's placement says), else
    the wait, naming how many tasks are in which state (``2 of 4 tasks INITIALIZING``)."""
    total = 0
    other: dict[str, int] = {}
    for vertex in vertices:
        for state, count in (vertex.get("tasks") or {}).items():
            if isinstance(count, int) and count > 0:
                total += count
                if state not in TASKS_OK and state not in WAITING_STATES:
                    other[str(state)] = other.get(str(state), 0) + count
    if not other:
        return None
    states = ", ".join(f"{n} {s}" for s, n in sorted(other.items()))
    return UnavailableError(
        f"job {job} is RUNNING but not all its tasks are ({states} of {total}): "
        "restarting or rescaling"
    )


def root_exception(answer: Mapping[str, Any]) -> str | None:
    """The first line of a failed job's root exception (``GET /jobs/{id}/exceptions``): the
    newest entry of Flink 1.15+'s ``exceptionHistory``, else the legacy ``root-exception``."""
    entries = (answer.get("exceptionHistory") or {}).get("entries") or []
    text = entries[0].get("stacktrace") if entries else answer.get("root-exception")
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip().splitlines()[0][:300]
