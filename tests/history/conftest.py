"""Fixtures of the history tests: real runs of a tiny scenario and of two shipped examples with
checkpoints, bursts of a watch, one Spark.

The runs are real: the scenarios run on bpmon's runtime through the service, which saves each
report and appends it to the history, exactly as ``bpmon run`` does. The second tiny run's sink
is four times slower than the first's, so between them its capacity drops, it becomes the root
cause and its producers become backpressured: a regression the analytics must find. The shipped
``checkpoint-timeouts`` (every aligned checkpoint expires behind backpressure) and ``healthy``
(quick checkpoints) examples run once a session, several bursts each, for the checkpoint columns
and their trend.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.history.spark import java_missing
from bpmon.history.store import HistoryStore
from bpmon.model.events import JobEnded
from bpmon.model.values import Report
from bpmon.scenario import load_example, parse_scenario
from bpmon.service.comparison import capacity_of_vertex
from bpmon.service.facade import Settings, WatchPlan, drain, load_report, run_scenario, watch
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
    """The two runs, made again (three tries, each in a folder of its own) while their reports
    do not show what the tests rest on: a sink capacity that dropped to well under 80%. CI once
    found no drop between them and left no trace why; a failure now names both reports'
    figures and findings."""
    seen = []
    for _ in range(3):
        runs_dir = tmp_path_factory.mktemp("real-runs")
        fast = run_tiny(runs_dir, cost_us=1000, warmup_s=0.5)  # ~40% busy: ~1,000 records/s
        slow = run_tiny(runs_dir, cost_us=4000, warmup_s=0.5)  # saturated: ~250 records/s
        figures = [_sink(runs_dir, run) for run in (fast, slow)]
        (before, _), (after, _) = figures
        if before is not None and after is not None and after < 0.6 * before:
            return RealRuns(runs_dir, fast, slow)
        seen.append(figures)
    raise AssertionError(f"no capacity drop between the tiny runs (capacity, findings): {seen}")


def _sink(runs_dir: Path, run: str) -> tuple[float | None, list[str]]:
    """The tiny job's sink capacity in run ``run``'s report, and the report's findings."""
    report = load_report(run, Settings(runs_dir=runs_dir))
    (sink,) = [v for v in report.vertices if v.name == "out"]
    return capacity_of_vertex(sink), [f"{f.kind}: {f.detail}" for f in report.findings]


CHECKPOINTED = {"checkpoint-timeouts": 3, "healthy": 2}
"""The shipped examples with checkpoints, and the bursts each is watched for."""


@dataclass(frozen=True)
class CheckpointedRuns:
    """One real run of each of :data:`CHECKPOINTED` in one runs directory.

    Attributes:
        run_ids: each example's run id, by example name.
        reports: each run's reports in burst order, as the watch made them (and appended them).
    """

    runs_dir: Path
    run_ids: dict[str, str]
    reports: dict[str, tuple[Report, ...]]


def watch_example(name: str, runs_dir: Path, bursts: int) -> JobEnded:
    """The shipped example ``name`` on the real runtime: ``bursts`` shortened bursts (60 samples
    50 ms apart) back to back after its warm-up, without settling (settling waits for the
    backpressure to stop building; the checkpoints need only the warm-up), then stopped."""
    scenario = load_example(name)
    warmup = scenario.monitor.warmup_s
    plan = WatchPlan(samples=60, interval_ms=50.0, bursts=bursts, warmup_s=warmup)
    *_, ended = watch(RuntimeTarget(scenario), plan, Settings(runs_dir=runs_dir))
    assert isinstance(ended, JobEnded), ended
    assert len(ended.reports) == bursts, ended
    return ended


@pytest.fixture(scope="session")
def checkpointed_runs(tmp_path_factory: pytest.TempPathFactory) -> CheckpointedRuns:
    """:data:`CHECKPOINTED` run once a session (about 25 s), one after the other."""
    runs_dir = tmp_path_factory.mktemp("checkpointed") / "runs"
    ended = {name: watch_example(name, runs_dir, bursts) for name, bursts in CHECKPOINTED.items()}
    return CheckpointedRuns(
        runs_dir,
        {name: e.run_id for name, e in ended.items()},
        {name: tuple(e.reports) for name, e in ended.items()},
    )


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
