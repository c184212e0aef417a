"""A real Flink cluster for the tests that need one: one per test session, started and stopped
by Flink's own scripts (``cluster.py``), a few short jobs on it.

Skipped when Flink is not installed (``scripts/setup --flink`` installs it), never in CI, where
``scripts/setup --test`` installs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from .cluster import ADAPTIVE, Cluster, missing_reason


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone cluster, one TaskManager, on loopback; stopped at the end of the session."""
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the Flink tests", pytrace=False)
        pytest.skip(reason)
    cluster = Cluster(tmp_path_factory.mktemp("flink"), task_managers=1)
    cluster.start()
    try:
        cluster.upload()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def adaptive_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of its own with Flink's adaptive scheduler (rescales in place), one
    TaskManager of 8 slots; for the tests that rescale jobs or kill a TaskManager."""
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the Flink tests", pytrace=False)
        pytest.skip(reason)
    cluster = Cluster(tmp_path_factory.mktemp("flink-adaptive"), task_managers=1, config=ADAPTIVE)
    cluster.start()
    try:
        cluster.upload()
        yield cluster
    finally:
        cluster.stop()


RunJob = Callable[[str], str]


@pytest.fixture
def flink_job(flink_cluster: Cluster) -> Iterator[RunJob]:
    """Runs a test job (``BpmonFlinkJobs`` topology) and cancels it after the test."""
    started: list[str] = []

    def run(topology: str) -> str:
        job = flink_cluster.submit(topology)
        started.append(job)
        return job

    yield run
    for job in started:
        flink_cluster.cancel(job)
