"""End to end: every example scenario, run on the real runtime and watched, is diagnosed right.

Each scenario file states its ground truth in ``[expect]`` (the bottleneck vertex, the kind of
cause and the subtasks to name). Here the whole chain runs for real through the service facade:
runtime -> stack sampler and metrics -> rules engine -> runs store. One burst is taken after the
scenario's own warm-up; the burst is shortened to 60 x 50 ms (3 s instead of Flink's 5 s) so the
whole corpus fits in well under two minutes. Every job must end without leaking a buffer or a
thread.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bpmon.model import Report
from bpmon.runtime.job import JobResult
from bpmon.scenario import (
    Expectation,
    Scenario,
    example_names,
    example_path,
    load_example,
    load_expectation,
    load_scenario,
)
from bpmon.service import RunSession, Settings

SHARED = Path(__file__).resolve().parents[2] / "shared" / "scenarios"
SAMPLES = 60
INTERVAL_MS = 50.0


def shared_files() -> list[object]:
    """One parameter per file of the shared corpus, or one skipped placeholder without it."""
    if not SHARED.is_dir():
        reason = f"no shared scenario corpus at {SHARED} (it sits beside the repository)"
        return [pytest.param(None, id="shared", marks=pytest.mark.skip(reason=reason))]
    return [pytest.param(path, id=f"shared/{path.stem}") for path in sorted(SHARED.glob("*.toml"))]


def watch_once(scenario: Scenario, runs_dir: Path) -> tuple[Report, JobResult]:
    """Run ``scenario``, take one shortened burst after its warm-up, stop it; report and result."""
    monitor = replace(scenario.monitor, samples=SAMPLES, interval_ms=INTERVAL_MS)
    session = RunSession(replace(scenario, monitor=monitor), Settings(runs_dir=runs_dir))
    session.start()
    try:
        session.wait(monitor.warmup_s)
        report = session.burst()
    finally:
        result = session.stop()
    assert session.outcome.saved == [runs_dir / report.run_id / "report.json"]
    assert session.outcome.saved[0].is_file()
    return report, result


def summary(report: Report) -> str:
    """The levels and root causes of a report, for assertion messages."""
    levels = ", ".join(f"{v.name}={v.level}({v.ratio})" for v in report.vertices)
    causes = "; ".join(f"{c.vertex}/{c.kind}/{list(c.subtasks)}" for c in report.root_causes or ())
    return f"levels: {levels}; root causes: {causes or 'none'}"


def check_head_of_line(report: Report, scenario: Scenario) -> None:
    """Under TCP flow control, the collateral victims are findings, never root causes."""
    if scenario.network.flow_control != "tcp":
        return
    victims = {f.vertex for f in report.findings if f.kind == "head-of-line"}
    assert victims, f"no head-of-line finding; {summary(report)}"
    assert not victims & {c.vertex for c in report.root_causes or ()}, summary(report)


def check_diagnosis(report: Report, result: JobResult, expected: Expectation) -> None:
    """The job ended cleanly and the report names what ``[expect]`` says, or nothing."""
    assert result.leaks == (), result.leaks
    assert result.state == "cancelled" and result.error is None, result
    assert report.source == "runtime"
    assert report.window.samples == SAMPLES
    assert report.root_causes is not None, "the report was not diagnosed"
    if not expected.root_cause:
        assert report.root_causes == (), summary(report)
        assert all(v.level == "OK" for v in report.vertices), summary(report)
        return
    assert report.root_causes, f"no root cause found; {summary(report)}"
    top = report.root_causes[0]
    assert (top.vertex, top.kind) == (expected.root_cause, expected.kind), summary(report)
    assert set(expected.subtasks) <= set(top.subtasks), summary(report)
    assert any(v.level in ("LOW", "HIGH") for v in report.vertices), summary(report)
    assert top.evidence and top.recommendation, top


@pytest.mark.slow
@pytest.mark.parametrize("name", example_names())
def test_shipped_example_is_diagnosed_as_its_expect_table_says(name: str, tmp_path: Path) -> None:
    expected = load_expectation(example_path(name))
    assert expected is not None, f"shipped example {name} has no [expect] table"
    scenario = load_example(name)
    report, result = watch_once(scenario, tmp_path)
    check_diagnosis(report, result, expected)
    check_head_of_line(report, scenario)


@pytest.mark.slow
@pytest.mark.parametrize("path", shared_files())
def test_shared_scenario_is_diagnosed_as_its_expect_table_says(path: Path, tmp_path: Path) -> None:
    expected = load_expectation(path)
    assert expected is not None, f"{path} has no [expect] table"
    scenario = load_scenario(path)
    report, result = watch_once(scenario, tmp_path)
    check_diagnosis(report, result, expected)
    check_head_of_line(report, scenario)
