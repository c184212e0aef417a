"""Fixtures of the history tests: real runs of a tiny scenario, bursts of a watch, one Spark.

The runs are real: the tiny scenario runs on bpmon's runtime through the service, which saves
each report and appends it to the history, exactly as ``bpmon run`` does. The second run's sink
is four times slower than the first's, so between them its capacity drops, it becomes the root
cause and its producers become backpressured: a regression the analytics must find.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bpmon.history.spark import java_missing
from bpmon.history.store import HistoryStore
from bpmon.model.values import Report
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, drain, run_scenario
from tests.history.reports import ROWS_PER_WINDOW, window_report
from tests.optional import tool_missing
from tests.tiny import tiny


def run_tiny(runs_dir: Path, cost_us: int, *, warmup_s: float = 0.0, bursts: int = 1) -> str:
    """Run the tiny scenario once (real runtime, real save path); its run id."""
    text = tiny(cost_us=cost_us).replace("warmup_s = 0", f"warmup_s = {warmup_s}")
    ended = drain(
        run_scenario(
            parse_scenario(text), Settings(runs_dir=runs_dir), bursts=bursts, duration_s=0.3
        )
    )
    return ended.run_id


@pytest.fixture(scope="session")
def tiny_run() -> Callable[..., str]:
    """:func:`run_tiny`, for tests that make runs of their own."""
    return run_tiny


@dataclass(frozen=True)
class RealRuns:
    """Two real runs of one job, the second with a four times slower sink.

    Both warm up for half a second: in the first 100 ms of a job its sink has barely begun,
    and a window there measures too little busy time for a capacity.
    """

    runs_dir: Path
    fast: str
    slow: str


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> RealRuns:
    runs_dir = tmp_path_factory.mktemp("real-runs")
    fast = run_tiny(runs_dir, cost_us=1000, warmup_s=0.5)  # ~40% busy: ~1,000 records/s
    slow = run_tiny(runs_dir, cost_us=4000, warmup_s=0.5)  # saturated: ~250 records/s
    return RealRuns(runs_dir, fast, slow)


@pytest.fixture(scope="session")
def java() -> None:
    """Java for Spark, found as bpmon finds it (``JAVA_HOME``, then ``PATH``): the Spark tests
    skip where it is missing, with the reason, and fail in CI."""
    problem = java_missing()
    if problem is not None:
        reason = f"Spark needs a Java 17 runtime ({problem}): scripts/setup --spark installs one"
        tool_missing(reason, "the Spark tests")


@pytest.fixture(scope="session")
def spark(java: None) -> Iterator[Any]:
    """The one local Spark session of the test session (local[2], quiet, UI off)."""
    from bpmon.history.spark import spark_session

    with spark_session("local[2]") as session:
        yield session


@pytest.fixture(scope="session")
def make_report() -> Callable[..., Report]:
    """:func:`window_report`, for tests that append bursts of a watch."""
    return window_report


def assert_exactly(store: HistoryStore, windows: set[tuple[str, int]]) -> None:
    """``store`` reads each of ``windows`` (bursts of :func:`window_report`) exactly once, with
    all its rows, and nothing else: three subtask rows each, one cause row per odd burst."""
    subtasks = store.read("subtasks")
    seen = Counter(zip(subtasks["run_id"].to_pylist(), subtasks["burst"].to_pylist(), strict=True))
    assert set(seen) == windows
    assert set(seen.values()) <= {ROWS_PER_WINDOW}
    causes = store.read("causes")
    named = Counter(zip(causes["run_id"].to_pylist(), causes["burst"].to_pylist(), strict=True))
    assert named == Counter({w: 1 for w in windows if w[1] % 2})


@pytest.fixture(scope="session")
def exactly() -> Callable[[HistoryStore, set[tuple[str, int]]], None]:
    """:func:`assert_exactly`."""
    return assert_exactly
