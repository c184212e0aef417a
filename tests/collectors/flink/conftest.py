"""A real Flink cluster for the tests that need one: one per test session, started and stopped
by Flink's own scripts (``cluster.py``), a few short jobs on it.

Skipped when Flink is not installed (``scripts/setup --flink`` installs it), never in CI, where
``scripts/setup --test`` installs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from .cluster import ADAPTIVE, Cluster, missing_reason


@contextmanager
def started_cluster(
    factory: pytest.TempPathFactory, name: str, **options: Any
) -> Iterator[Cluster]:
    """A cluster of ``options`` (``Cluster``'s), its jobs uploaded, stopped after; the test
    skipped where Flink cannot run here, and failed in CI, which must run the Flink tests."""
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the Flink tests", pytrace=False)
        pytest.skip(reason)
    cluster = Cluster(factory.mktemp(name), **options)
    cluster.start()
    try:
        cluster.upload()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone cluster, one TaskManager, on loopback; stopped at the end of the session."""
    with started_cluster(tmp_path_factory, "flink", task_managers=1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def adaptive_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of its own with Flink's adaptive scheduler (rescales in place), one
    TaskManager of 8 slots; for the tests that rescale jobs or kill a TaskManager."""
    with started_cluster(
        tmp_path_factory, "flink-adaptive", task_managers=1, config=ADAPTIVE
    ) as cluster:
        yield cluster


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
