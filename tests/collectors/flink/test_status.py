"""How a Flink job's and its tasks' states read for a watch: every state Flink names, and the
documents of a real cluster (``fixtures/``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bpmon.collectors.flink.placement import starving
from bpmon.collectors.flink.plan import SubtaskPlacement, placements_of
from bpmon.collectors.flink.status import root_exception, state_error, tasks_error
from bpmon.model.errors import JobError, JobOverError, UnavailableError

from .fake_flink import recorded

JOB = "'etl' (5d7e)"

# Flink 2.3's JobStatus, as its enum lists them (org.apache.flink.api.common.JobStatus).
WAITS = ("INITIALIZING", "CREATED", "FAILING", "CANCELLING", "RESTARTING", "SUSPENDED")
ENDS = ("CANCELED", "FINISHED")


@pytest.mark.parametrize("state", [*WAITS, "RECONCILING"])
def test_a_job_on_its_way_is_waited_for(state: str) -> None:
    error = state_error(JOB, state)
    assert isinstance(error, UnavailableError)
    assert str(error).startswith(f"job {JOB} is ") and state in str(error)


@pytest.mark.parametrize("state", ENDS)
def test_a_cancelled_or_finished_job_ends_the_watch_as_ended(state: str) -> None:
    error = state_error(JOB, state)
    assert isinstance(error, JobOverError) and not isinstance(error, JobError)
    assert state in str(error)


def test_a_failed_job_ends_the_watch_as_failed_with_its_root_exception() -> None:
    error = state_error(JOB, "FAILED", "java.lang.RuntimeException: boom")
    assert isinstance(error, JobError)
    assert str(error) == f"job {JOB} FAILED: java.lang.RuntimeException: boom"
    assert state_error(JOB, "RUNNING") is None


def details(folder: str) -> Any:
    routes = recorded(folder)
    jid = routes["/jobs/overview"][1]["jobs"][0]["jid"]
    return json.loads(json.dumps(routes[f"/jobs/{jid}"][1]))


def test_running_and_finished_tasks_can_be_watched() -> None:
    assert tasks_error(JOB, details("rescale/up")["vertices"]) is None
    assert tasks_error(JOB, details("partly-bounded")["vertices"]) is None  # a FINISHED source


def test_tasks_initializing_after_a_restart_are_waited_for() -> None:
    """Seen on Flink 2.3's adaptive scheduler: the job RUNNING, a rescaled vertex's tasks
    still being set up."""
    vertices = details("rescale/up")["vertices"]
    for v in vertices[1:]:
        v["tasks"] = {**v["tasks"], "RUNNING": 0, "INITIALIZING": v["parallelism"]}
    error = tasks_error(JOB, vertices)
    assert isinstance(error, UnavailableError)
    assert "(4 INITIALIZING of 5)" in str(error)


def test_tasks_waiting_to_be_deployed_are_judged_by_how_long() -> None:
    """DEPLOYING for 2 s after a restart is a wait (a gap); SCHEDULED for 12 s (a job asking for
    more slots than the cluster has, recorded on Flink 2.3) is a job short of slots, shown."""
    vertices = details("rescale/up")["vertices"]
    for v in vertices[1:]:
        v["tasks"] = {**v["tasks"], "RUNNING": 0, "DEPLOYING": v["parallelism"]}
    assert tasks_error(JOB, vertices) is None  # the placement decides, subtask by subtask

    def place(status: str, durations: dict[str, int] | None) -> SubtaskPlacement:
        subtask = {"subtask": 0, "status": status, "attempt": 0}
        if durations is not None:
            subtask["status-duration"] = durations
        return placements_of({"subtasks": [subtask]})[0]

    recorded = {"DEPLOYING": -1, "CREATED": 7, "SCHEDULED": 12068, "RUNNING": -1}
    assert starving(place("SCHEDULED", recorded))
    assert place("SCHEDULED", recorded).in_status_s == 12.068
    assert not starving(place("DEPLOYING", {"SCHEDULED": 30, "DEPLOYING": 2000}))
    assert not starving(place("SCHEDULED", None))  # how long is not known: a wait
    assert not starving(place("RUNNING", {"RUNNING": 60000}))


def test_the_root_exception_is_its_first_line() -> None:
    history = {
        "exceptionHistory": {
            "entries": [{"stacktrace": "java.lang.RuntimeException: boom\n\tat X.y(X.java:1)"}]
        }
    }
    assert root_exception(history) == "java.lang.RuntimeException: boom"
    assert root_exception({"root-exception": "java.io.IOException: gone\n\tat ..."}) == (
        "java.io.IOException: gone"
    )
    assert root_exception({"exceptionHistory": {"entries": []}}) is None
