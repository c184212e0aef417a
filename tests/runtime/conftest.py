"""Fixtures for the runtime tests: network environments and jobs, proven leak-free at teardown."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bpmon.runtime.gate import InputGate
from bpmon.runtime.job import Job, JobResult
from bpmon.runtime.network import NetworkEnvironment
from bpmon.scenario import NetworkConfig, Scenario
from tests.runtime.jobs import StartJob, StopJob, read_all


@pytest.fixture
def make_env() -> Iterator[Callable[..., NetworkEnvironment]]:
    """Build ``NetworkEnvironment(NetworkConfig(**settings))``; each is shut down and checked."""
    made: list[NetworkEnvironment] = []

    def build(**settings: Any) -> NetworkEnvironment:
        env = NetworkEnvironment(NetworkConfig(**settings))
        made.append(env)
        return env

    yield build
    for env in made:
        env.shutdown()
        assert env.leaks() == []


Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]


@pytest.fixture
def drain() -> Drain:
    """``drain(env, gate)``: read everything the gate has now, recycling the buffers."""
    return read_all


# -- jobs: every job a test starts is proven to end cleanly -----------------------------------


def end_cleanly(job: Job) -> JobResult:
    """Stop ``job`` and prove it ended as the design demands.

    Every segment is back in its pool (``result.leaks == ()``) and none of the job's subtask
    threads is alive once ``stop()`` returns, which waits at most ``STOP_TIMEOUT_S`` for them
    (a thread still running then is a leak in the result). The thread check reads
    ``threading.enumerate()`` rather than trusting the job's own report (other jobs may run
    threads of the same names). How long stopping takes is the job's own bound, not asserted
    here: a loaded machine may stretch it.
    """
    result = job.stop()
    own = {id(task.thread) for task in job.all_tasks()}
    alive = sorted(t.name for t in threading.enumerate() if id(t) in own)
    assert result.leaks == (), f"{job.name}: {result.leaks}"
    assert alive == [], f"{job.name}: task threads still alive after stop: {alive}"
    return result


class _Jobs:
    """The jobs a test (or a test module) started; :meth:`close` ends each one cleanly."""

    def __init__(self) -> None:
        self.started: list[Job] = []

    def start(self, scenario: Scenario) -> Job:
        job = Job(scenario)
        self.started.append(job)
        job.start()
        return job

    def close(self) -> None:
        for job in self.started:
            end_cleanly(job)


@pytest.fixture(scope="session")
def stop_job() -> StopJob:
    """``stop_job(job)``: stop it and assert no leak, no live task thread, stopped in time."""
    return end_cleanly


@pytest.fixture
def start_job() -> Iterator[StartJob]:
    """``start_job(scenario)``: build and start a Job; at teardown each is ended cleanly."""
    jobs = _Jobs()
    yield jobs.start
    jobs.close()


@pytest.fixture(scope="module")
def start_module_job() -> Iterator[StartJob]:
    """As :func:`start_job`, for jobs shared by the tests of one module (one warm-up)."""
    jobs = _Jobs()
    yield jobs.start
    jobs.close()
