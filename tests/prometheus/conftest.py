"""Fixtures of the Prometheus tests: one real report, shared by the exposition and server tests."""

from __future__ import annotations

import pytest

from bpmon.model.values import Report
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, drain, run_scenario
from tests.prometheus.bottleneck import BOTTLENECK


@pytest.fixture(scope="session")
def bottleneck_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The report of one burst of BOTTLENECK on bpmon's runtime (about a second)."""
    settings = Settings(runs_dir=tmp_path_factory.mktemp("runs"))
    ended = drain(run_scenario(parse_scenario(BOTTLENECK), settings, bursts=1, duration_s=1.0))
    return ended.reports[-1]
