"""The report never contradicts itself: its text quotes the figures of its table.

Two halves. Hand-built observations pin each contradiction users met (each test fails on the old
wording): a HIGH vertex under "No backpressure: every vertex is OK.", a busy figure from another
view than the table's, "all 1 subtasks", "busy at least 100%", capacity figures in the text but
null in the JSON. Then real jobs: shipped examples run on bpmon's runtime (the shortened runs the
diagnosis end to end checks, made once a session), and every figure every evidence line quotes
is checked against the report's fields (:mod:`.figures`).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console

from bpmon.model.evidence import EvidenceLine
from bpmon.model.values import Observation, Report, RootCause, TargetSettings
from bpmon.render.report import render_markdown, render_text
from bpmon.rules.config import RulesConfig
from bpmon.rules.engine import diagnose
from tests.diagnosis.watched import ShippedRuns

from .figures import problems, texts
from .observations import edge, lag, observation, sub, vertex
from .sentences import table_percent, unaccounted

RULES = RulesConfig()


def diagnosed(obs: Observation) -> Report:
    report = diagnose(obs, RULES)
    assert problems(report) == []
    return report


def text(report: Report) -> str:
    console = Console(record=True, width=120, file=open("/dev/null", "w"))  # noqa: SIM115
    render_text(report, console)
    out = " ".join(console.export_text().split())
    console.file.close()
    return out


def evidence(report: Report) -> str:
    return " | ".join(line for c in report.root_causes or () for line in texts(c))


# -- no root cause is not "no backpressure" -----------------------------------------------------


def saturated_source() -> Observation:
    """A source HIGH while its consumer is neither busy nor idle enough to blame (the runtime's
    own saturation looks like this): nothing explains the backpressure."""
    return observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, rout=900_000)),
        vertex("sink", sub(0, busy=0.6, rin=900_000), inputs=[edge("src")], kind="sink"),
    )


def loop_of_waits() -> Observation:
    """Two vertices feeding each other, both HIGH: a cycle no busy or idle vertex ends."""
    return observation(
        vertex("a", sub(0, bp=0.8, busy=0.1), inputs=[edge("b")]),
        vertex("b", sub(0, bp=0.7, busy=0.1), inputs=[edge("a")]),
    )


@pytest.mark.parametrize("obs", [saturated_source(), loop_of_waits()], ids=["source", "loop"])
def test_backpressure_without_a_root_cause_is_an_unexplained_finding(obs: Observation) -> None:
    report = diagnosed(obs)
    assert report.root_causes == ()
    above = [v.name for v in report.vertices if v.level in ("LOW", "HIGH")]
    assert above and unaccounted(report) == []
    assert {f.kind for f in report.findings} == {"unexplained"}
    for shown in (text(report), render_markdown(report)):
        assert "No backpressure" not in shown
        assert "Backpressure without a root cause" in shown


def test_a_loop_of_waits_names_each_vertex_in_it() -> None:
    report = diagnosed(loop_of_waits())
    details = {f.vertex: f.detail for f in report.findings}
    assert set(details) == {"a", "b"}
    assert details["a"].startswith("a is HIGH (0.80) and waits on b")


# -- the figures are the table's -----------------------------------------------------------------


def test_busy_figures_are_the_tables_not_a_blend_of_two_views() -> None:
    # samples say 99% and 97% busy, the time accounting 90% and 88%: the table shows the time
    # accounting (0.90, 0.88), so must the text; the old text quoted the mean (at least 92%).
    obs = observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, rout=1000, out_pool=1.0)),
        vertex(
            "enrich",
            sub(0, busy=0.99, rin=500, rout=500, drift=0.18),
            sub(1, busy=0.97, rin=500, rout=500, drift=0.18),
            inputs=[edge("src")],
        ),
        vertex("sink", sub(0, busy=0.05, rin=1000), inputs=[edge("enrich")], kind="sink"),
    )
    report = diagnosed(obs)
    enrich = report.vertices[1]
    assert [table_percent(s.metrics.busy_ratio) for s in enrich.subtasks] == ["90", "88"]
    lines = evidence(report)
    assert "both subtasks of enrich are busy 88% to 90%" in lines
    assert "enrich[0] busy 90% (time accounting), 99% (samples)" in lines
    assert "92%" not in lines and "94%" not in lines


def test_one_subtask_is_not_all_1_subtasks_and_full_busy_is_not_at_least_100() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.95, busy=0.02, timed=False)),
        vertex("sink", sub(0, busy=1.0, timed=False), inputs=[edge("src")], kind="sink"),
    )
    lines = evidence(diagnosed(obs))
    assert "the only subtask of sink is busy 100%" in lines
    assert "all 1 subtasks" not in lines and "at least 100%" not in lines


def test_a_few_busy_subtasks_are_contrasted_with_the_tables_figures() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.8, busy=0.05), sub(1, bp=0.7, busy=0.05)),
        vertex(
            "agg",
            sub(0, busy=0.98, rin=900, drift=0.1),
            sub(1, busy=0.30, rin=300, drift=0.1),
            sub(2, busy=0.20, rin=300, drift=0.1),
            inputs=[edge("src", "hash")],
        ),
        vertex("sink", sub(0, busy=0.05, rin=1500), inputs=[edge("agg")], kind="sink"),
    )
    report = diagnosed(obs)
    shown = [table_percent(s.metrics.busy_ratio) for s in report.vertices[1].subtasks]
    assert f"agg[0] is busy {shown[0]}%, the others {shown[2]}% to {shown[1]}%" in evidence(report)


LAG = lag(2000.0)
"""The source owes 2,000 more records every second."""


def test_capacity_in_the_text_is_the_capacity_in_the_json() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.8, busy=0.03, rout=1000, out_pool=1.0, metrics=LAG)),
        vertex("map", sub(0, busy=0.99, rin=1000, rout=1000), inputs=[edge("src")]),
        vertex("sink", sub(0, busy=0.05, rin=1000), inputs=[edge("map")], kind="sink"),
    )
    (cause,) = diagnosed(obs).root_causes or ()
    assert cause.capacity_per_subtask is not None and cause.offered_rate is not None
    assert f"~{cause.capacity_per_subtask:,.0f} records/s per subtask" in evidence(diagnosed(obs))
    assert f"~{cause.offered_rate:,.0f} records/s" in evidence(diagnosed(obs))
    assert f"{cause.recommended_parallelism} subtasks instead of 1" in cause.recommendation


def test_idle_figures_of_network_and_head_of_line_are_the_tables() -> None:
    network = observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, rout=100, out_pool=1.0, tm=0)),
        vertex("map", sub(0, busy=0.1, rin=100, in_pool=0.05, tm=1, drift=0.1),
               inputs=[edge("src")]),
    )  # fmt: skip
    tcp = observation(  # one exchange a -> c: a[0] -> c[0] shares TM0 -> TM1 with a[1] -> c[1]
        vertex("a", sub(0, bp=0.3, busy=0.05, rout=100, out_pool=1.0, tm=0),
               sub(1, bp=0.6, busy=0.05, rout=100, out_pool=1.0, tm=0)),
        vertex("c", sub(0, busy=0.05, rin=100, tm=1, drift=0.1),
               sub(1, busy=0.99, rin=100, tm=1), inputs=[edge("a", "forward")], kind="sink"),
        settings=TargetSettings(flow_control="tcp"),
    )  # fmt: skip
    assert "map idles" in evidence(diagnosed(network))
    assert [f.kind for f in diagnosed(tcp).findings] == ["head-of-line"]


def _tampered(report: Report, cause: RootCause, index: int, line: EvidenceLine) -> Report:
    lines = list(cause.evidence)
    lines[index] = line
    return replace(report, root_causes=(replace(cause, evidence=tuple(lines)),))


def test_the_cross_check_catches_a_figure_that_is_not_the_tables() -> None:
    """Each figure moved off its field is caught, and so is a number written as words."""
    report = diagnosed(
        observation(
            vertex("src", sub(0, bp=0.8, busy=0.03, rout=1000, out_pool=1.0)),
            vertex("map", sub(0, busy=0.95, rin=1000, rout=1000), inputs=[edge("src")]),
            vertex("sink", sub(0, busy=0.05, rin=1000), inputs=[edge("map")], kind="sink"),
        )
    )
    (cause,) = report.root_causes or ()
    assert "map[0] busy 93% (time accounting), 95% (samples)" in texts(cause)
    moved = 0
    for index, line in enumerate(cause.evidence):
        for n, part in enumerate(line.parts):
            if isinstance(part, str):
                parts = [*line.parts[:n], part + " 7", *line.parts[n + 1 :]]
                assert problems(_tampered(report, cause, index, EvidenceLine(tuple(parts))))
                continue
            if part.what == "busy-sampled":  # the table shows no sampled share: nothing to miss
                continue
            off = replace(part, value=part.value + 1.0, shown=f"{part.value + 1.0:g}")
            parts = [*line.parts[:n], off, *line.parts[n + 1 :]]
            assert problems(_tampered(report, cause, index, EvidenceLine(tuple(parts)))), off
            moved += 1
    assert moved >= 8
    hidden = replace(report, root_causes=(), findings=())
    assert problems(hidden) == ["src is above OK and nothing accounts for it"]


# -- real jobs -----------------------------------------------------------------------------------

EXAMPLES = ["hot-key", "slow-subtask", "tcp-head-of-line", "slow-sink", "fan-in"]
"""Shipped examples that between them write every kind of evidence line the runtime can show."""


SATURATED_RUNS = 3
"""Runs of an example at most, while the runtime reports it could not keep up (a busy machine)."""


@pytest.fixture(scope="module")
def example_reports(shipped_runs: ShippedRuns) -> dict[str, Report]:
    """Each example's report from the session's shipped runs (those the diagnosis end to end
    checks), run again while it says the runtime could not keep up."""
    reports = {}
    for name in EXAMPLES:
        reports[name] = shipped_runs[name].report
        for _ in range(SATURATED_RUNS - 1):  # a machine too busy describes itself: run again
            if not any(f.kind == "runtime-saturated" for f in reports[name].findings):
                break
            reports[name] = shipped_runs.fresh(name).report
    return reports


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_every_figure_of_a_real_report_is_its_own(
    example_reports: dict[str, Report], name: str
) -> None:
    report = example_reports[name]
    assert problems(report) == []
    if any(v.level in ("LOW", "HIGH") for v in report.vertices):
        assert "No backpressure" not in text(report)


@pytest.mark.slow
def test_the_real_reports_quote_figures_at_all(example_reports: dict[str, Report]) -> None:
    """The cross-check is not vacuous: the runs produced causes with evidence to check."""
    lines = [e for r in example_reports.values() for c in r.root_causes or () for e in texts(c)]
    assert len(lines) >= 3 * len(EXAMPLES)
    assert any("%" in line for line in lines) and any("records/s" in line for line in lines)
    figures = [f for r in example_reports.values() for c in r.root_causes or ()
               for e in c.evidence for f in e.figures]  # fmt: skip
    assert {"capacity", "offered", "busy"} <= {f.what for f in figures}
