"""Fixtures of the Prometheus tests: real reports, shared by the exposition and server tests."""

from __future__ import annotations

import pytest

from bpmon.model.values import Report
from bpmon.scenario import load_example, parse_scenario
from bpmon.service.facade import Settings, drain, run_scenario
from tests.prometheus.bottleneck import BOTTLENECK

CHECKPOINTS_HELD_BY = "enrich"
"""The vertex whose backpressure holds the checkpoints of ``checkpoint-timeouts`` up (its
``[expect] root_cause``)."""

SCALED_INEFFECTIVELY = "aggregate"
"""The vertex of ``hot-key`` the autoscaler would scale up without effect: its ``[expect]
root_cause``, a hot key that stays on one subtask whatever the parallelism."""


@pytest.fixture(scope="session")
def bottleneck_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The report of one burst of BOTTLENECK on bpmon's runtime (about a second)."""
    settings = Settings(runs_dir=tmp_path_factory.mktemp("runs"))
    ended = drain(run_scenario(parse_scenario(BOTTLENECK), settings, bursts=1, duration_s=1.0))
    return ended.reports[-1]


@pytest.fixture(scope="session")
def checkpoint_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The report of the shipped ``checkpoint-timeouts`` example's burst on bpmon's runtime, as
    ``bpmon run checkpoint-timeouts`` takes it (about 15 s): aligned checkpoints that expire
    behind the data enrich holds up, and the finding that says so."""
    settings = Settings(runs_dir=tmp_path_factory.mktemp("checkpoint-runs"))
    ended = drain(run_scenario(load_example("checkpoint-timeouts"), settings, bursts=1))
    report = ended.reports[-1]
    assert report.checkpoints is not None and report.checkpoints.last is not None, report
    return report


@pytest.fixture(scope="session")
def hot_key_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The report of the shipped ``hot-key`` example's burst on bpmon's runtime, as ``bpmon run
    hot-key`` takes it (about 15 s): 80% of the records on one subtask of aggregate, which the
    autoscaler would scale up all the same (``scales-ineffectively``)."""
    settings = Settings(runs_dir=tmp_path_factory.mktemp("hot-key-runs"))
    report = drain(run_scenario(load_example("hot-key"), settings, bursts=1)).reports[-1]
    assert report.autoscaler is not None, report.findings
    return report
