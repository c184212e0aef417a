"""End to end: every example scenario, run on the real runtime and watched, is diagnosed right.

The scenarios are the shipped examples (``bpmon/scenarios/``) and the acceptance cases beside this
file (``tests/scenarios/``, one more per shape with other figures). Each scenario file states its
ground truth in ``[expect]`` (the bottleneck vertex, the kind of cause and the subtasks to name).
Here the whole chain runs for real through the service facade: runtime -> stack sampler and
metrics -> rules engine -> runs store. One burst is taken after the scenario's own warm-up and
settling (as ``bpmon run`` does: backpressure takes seconds to build with Flink's flushing); the
burst is shortened to 60 x 50 ms (3 s instead of Flink's 5 s) so the whole corpus fits in about two
minutes. Every job must end without leaking a buffer or a thread.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.model.events import JobEnded, JobFailed
from bpmon.model.values import Report
from bpmon.scenario import (
    Expectation,
    Scenario,
    example_names,
    example_path,
    load_example,
    load_expectation,
    load_scenario,
    parse_scenario,
)

from .watched import SAMPLES, ShippedRuns, watch_once

CASES = Path(__file__).parents[1] / "scenarios"


def summary(report: Report) -> str:
    """The levels and root causes of a report, for assertion messages."""
    levels = ", ".join(f"{v.name}={v.level}({v.ratio})" for v in report.vertices)
    causes = "; ".join(f"{c.vertex}/{c.kind}/{list(c.subtasks)}" for c in report.root_causes or ())
    return f"levels: {levels}; root causes: {causes or 'none'}"


def diagnosed_as(report: Report, ended: JobEnded, expected: Expectation) -> bool:
    """Whether :func:`check_diagnosis` passes."""
    try:
        check_diagnosis(report, ended, expected)
    except AssertionError:
        return False
    return True


def loaded(report: Report) -> bool:
    """The runtime says the machine or the interpreter held it back in this window
    (``runtime-saturated``, ``host-busy``): a diagnosis of it may describe the machine."""
    return any(f.kind in ("runtime-saturated", "host-busy") for f in report.findings)


def check_head_of_line(report: Report, scenario: Scenario) -> None:
    """Under TCP flow control, the collateral victims are findings, never root causes."""
    if scenario.network.flow_control != "tcp":
        return
    victims = {f.vertex for f in report.findings if f.kind == "head-of-line"}
    assert victims, f"no head-of-line finding; {summary(report)}"
    assert not victims & {c.vertex for c in report.root_causes or ()}, summary(report)


def check_diagnosis(report: Report, ended: JobEnded, expected: Expectation) -> None:
    """The job ended cleanly and the report names what ``[expect]`` says, or nothing."""
    assert ended.leaks == (), ended.leaks
    assert not isinstance(ended, JobFailed), ended.error
    assert report.source == "runtime"
    assert report.window.samples == SAMPLES
    assert report.root_causes is not None, "the report was not diagnosed"
    kinds = [f.kind for f in report.findings]
    for kind in expected.findings:
        assert kind in kinds, f"no {kind} finding: {report.findings}; {summary(report)}"
    for kind in expected.without_findings:
        assert kind not in kinds, f"a {kind} finding: {report.findings}; {summary(report)}"
    if not expected.root_cause:
        assert report.root_causes == (), summary(report)
        assert all(v.level == "OK" for v in report.vertices), summary(report)
        return
    assert report.root_causes, f"no root cause found; {summary(report)}"
    top = report.root_causes[0]
    assert (top.vertex, top.kind) == (expected.root_cause, expected.kind), summary(report)
    if expected.subtasks:  # [expect] lists exactly the slow subtasks: the cause names them alone
        assert sorted(top.subtasks) == sorted(expected.subtasks), summary(report)
    if top.kind not in ("resource-starved", "spilling", "source-limited"):  # no backpressure shows
        assert any(v.level in ("LOW", "HIGH") for v in report.vertices), summary(report)
    assert top.evidence and top.recommendation, top
    held = [f for f in report.findings if f.kind == "checkpoint-backpressure"]
    assert all(f.vertex == top.vertex for f in held), held  # tied to the root cause


@pytest.mark.slow
@pytest.mark.parametrize("name", example_names())
def test_shipped_example_is_diagnosed_as_its_expect_table_says(
    name: str, shipped_runs: ShippedRuns
) -> None:
    expected = load_expectation(example_path(name))
    assert expected is not None, f"shipped example {name} has no [expect] table"
    run = shipped_runs[name]
    if not diagnosed_as(run.report, run.ended, expected) and loaded(run.report):
        run = shipped_runs.fresh(name)  # the figures described a busy machine: once more
    check_diagnosis(run.report, run.ended, expected)
    check_head_of_line(run.report, run.scenario)


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(CASES.glob("*.toml")), ids=lambda path: path.stem)
def test_acceptance_case_is_diagnosed_as_its_expect_table_says(path: Path, tmp_path: Path) -> None:
    expected = load_expectation(path)
    assert expected is not None, f"{path} has no [expect] table"
    scenario = load_scenario(path)
    report, ended = watch_once(scenario, tmp_path)
    if not diagnosed_as(report, ended, expected) and loaded(report):
        report, ended = watch_once(scenario, tmp_path)  # a busy machine's figures: once more
    check_diagnosis(report, ended, expected)
    check_head_of_line(report, scenario)


SATURATING = """
name = "flood"
[monitor]
warmup_s = 1.5
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 3000000
[[operators]]
name = "map"
kind = "map"
parallelism = 2
cost_us = 0
inputs = [{ from = "source" }]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 2
cost_us = 0
inputs = [{ from = "map" }]
"""


@pytest.mark.slow
def test_a_scenario_the_runtime_cannot_keep_up_with_is_reported_as_such(tmp_path: Path) -> None:
    """6 M records/s of zero-cost work saturates the interpreter: not a job bottleneck."""
    report, ended = watch_once(parse_scenario(SATURATING), tmp_path)
    assert ended.leaks == ()
    assert report.root_causes == (), summary(report)
    saturated = [f for f in report.findings if f.kind == "runtime-saturated"]
    assert saturated, report.findings
    assert "records/s" in saturated[0].detail


@pytest.mark.slow
def test_a_slow_operator_is_still_named_when_the_runtime_keeps_up(tmp_path: Path) -> None:
    """The demo's source is HIGH because enrich is slow: the runtime idles, enrich is named."""
    report, _ = watch_once(load_example("demo"), tmp_path)
    assert not [f for f in report.findings if f.kind == "runtime-saturated"]
    assert report.root_causes and report.root_causes[0].vertex == "enrich", summary(report)


@pytest.mark.slow
def test_a_job_that_stops_for_good_is_stalled_with_its_cycle_not_a_network_cause(
    tmp_path: Path,
) -> None:
    """TCP flow control plus aligned checkpoints: the runtime's one way to stop for good."""
    path = Path(__file__).parents[1] / "runtime" / "scenarios" / "tcp-aligned-stall.toml"
    scenario, expected = load_scenario(path), load_expectation(path)
    assert expected is not None and expected.kind == "stalled"
    report, ended = watch_once(scenario, tmp_path)
    assert ended.leaks == ()
    assert report.root_causes, summary(report)
    top = report.root_causes[0]
    assert (top.vertex, top.kind) == (expected.root_cause, "stalled"), summary(report)
    assert top.confidence < 0.9
    assert any(line.text.startswith("a cycle of waits") for line in top.evidence), top.evidence
    assert not [c for c in report.root_causes if c.kind == "network"], summary(report)
