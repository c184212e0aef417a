"""A main thread that only keeps a threaded program alive is never blamed (monitor, no topology).

The real queue pipeline runs with its main thread sleeping in a loop (it looks 100% busy: a
stage's ``time.sleep`` is its work) or joining a stage. Read with the real py-spy and diagnosed
without a topology, the root cause must be the slow ``upload`` stage: the main thread was never
seen on the data path. Before ``data_path`` existed the sleeping main thread, as busy as upload
and first in name order, was named ``slow-operator at MainThread``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bpmon.collectors.observe import observation_from_burst
from bpmon.collectors.profile import load_profile
from bpmon.collectors.pyspy.dumps import PySpySampler
from bpmon.model.errors import PermissionDeniedError
from bpmon.model.values import Observation
from bpmon.rules.engine import diagnose

from .pipelines import running_pipeline, skip_ptrace_denied


@pytest.fixture(scope="module", params=["sleep", "join"])
def keeper_observation(request: pytest.FixtureRequest) -> Iterator[Observation]:
    """One burst of queue_pipeline.py --keeper PARAM, grouped by thread names (no topology)."""
    with running_pipeline(keeper=request.param) as process:
        profile = load_profile("python-queue")
        sampler = PySpySampler(process.pid, profile)
        try:
            burst = sampler.burst(samples=20, interval_ms=50)
        except PermissionDeniedError as err:
            skip_ptrace_denied(err)
        yield observation_from_burst(burst, None, profile, f"pid-{process.pid}", "pyspy")


@pytest.mark.slow
def test_the_keeper_thread_is_off_the_data_path_and_the_stages_are_on_it(
    keeper_observation: Observation,
) -> None:
    main = keeper_observation.vertex("MainThread").subtasks[0]
    assert not main.data_path
    for stage in ("ingest", "transform", "upload"):
        assert all(s.data_path for s in keeper_observation.vertex(stage).subtasks), stage


@pytest.mark.slow
def test_the_slow_stage_is_the_root_cause_not_the_keeper_thread(
    keeper_observation: Observation,
) -> None:
    report = diagnose(keeper_observation)
    assert report.root_causes
    blamed = [c.vertex for c in report.root_causes]
    assert "MainThread" not in blamed
    assert blamed[0] == "upload"
    assert all("MainThread" not in f.vertex for f in report.findings)
