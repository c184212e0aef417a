"""The renderers show the whole report, readably at 80 and 120 columns, and as Markdown."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from rich.console import Console

from bpmon.model.events import LiveSnapshot
from bpmon.model.evidence import EvidenceLine
from bpmon.model.values import (
    Edge,
    Finding,
    Metrics,
    Report,
    RootCause,
    SubtaskStatus,
    VertexStatus,
    Window,
)
from bpmon.render.fit import Col, fit_table, kept_columns
from bpmon.render.liveview import live_table
from bpmon.render.report import (
    NARROW_NOTE,
    render_comparison,
    render_json,
    render_markdown,
    render_text,
)

Fits = Callable[..., str]
NOTE = NARROW_NOTE.format(columns="idle, out pool, in pool, rec/s in, rec/s out")

EVIDENCE = (
    "enrich[0] receives 61% of the records of enrich",
    "enrich[0] busy 99%, others idle 70%",
    "source is HIGH (0.97) and feeds enrich through a hash exchange",
)
ADVICE = "Spread the hot key: salt it, or pre-aggregate before the hash exchange."


def skewed_report(root_causes: tuple[RootCause, ...] | None = None) -> Report:
    """source (2 subtasks, HIGH) -> enrich (4 subtasks, one hot) -> sink (1 subtask, LOW)."""
    enrich = tuple(
        SubtaskStatus(
            i, "OK", 0.0, Metrics(0.99 if i == 0 else 0.3, 0.0 if i == 0 else 0.7, None, 0.1, 1.0)
        )
        for i in range(4)
    )
    lines = tuple(EvidenceLine.of_text(line) for line in EVIDENCE)
    cause = RootCause("enrich", "data-skew", (0,), 0.92, lines, ADVICE)
    return Report(
        run_id="20261122T101500Z-slow-enrich-3f9a",
        job="slow-enrich",
        source="runtime",
        window=Window(
            datetime(2026, 11, 22, 10, 15, 2, tzinfo=UTC),
            datetime(2026, 11, 22, 10, 15, 7, tzinfo=UTC),
            samples=100,
            interval_ms=50.0,
            jitter_ms_p99=0.8,
        ),
        vertices=(
            VertexStatus(
                name="source",
                parallelism=2,
                level="HIGH",
                ratio=0.97,
                metrics=Metrics(out_pool_usage=1.0, records_out_per_s=3990.0),
                subtasks=(SubtaskStatus(0, "HIGH", 0.98), SubtaskStatus(1, "HIGH", 0.96)),
            ),
            VertexStatus(
                name="enrich",
                parallelism=4,
                level="OK",
                ratio=0.0,
                metrics=Metrics(busy_ratio=0.99),
                inputs=(Edge("source", "hash"),),
                subtasks=enrich,
            ),
            VertexStatus(
                name="sink",
                parallelism=1,
                level="LOW",
                ratio=0.31,
                metrics=Metrics(records_in_per_s=12_345.0),
                subtasks=(SubtaskStatus(0, "LOW", 0.31),),
            ),
        ),
        root_causes=(cause,) if root_causes is None else root_causes,
        findings=(Finding("head-of-line", "sink", "shares a TCP connection with enrich"),),
    )


def text_of(report: Report, width: int, color: bool = False) -> str:
    """What a real rich console of ``width`` columns shows for the report."""
    console = Console(
        record=True,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        file=open("/dev/null", "w"),  # noqa: SIM115 - the console only records
    )
    render_text(report, console)
    out = console.export_text(styles=color)
    console.file.close()
    return out


def flat(text: str) -> str:
    """The text with every run of whitespace made one space, so wrapped lines read whole."""
    return " ".join(text.split())


@pytest.mark.parametrize("width", [80, 120])
def test_text_shows_vertices_levels_and_the_root_cause(width: int) -> None:
    out = text_of(skewed_report(), width)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    lines = out.splitlines()
    row = {
        name: next(ln for ln in lines if ln.split()[:1] == [name]) for name in ("source", "sink")
    }
    assert "HIGH" in row["source"]
    assert "0.97" in row["source"]
    assert "3,990" in row["source"]
    assert "LOW" in row["sink"]
    assert "12,345" in row["sink"]
    whole = flat(out)
    assert "data-skew at enrich, subtask 0 (confidence 0.92)" in whole
    for line in EVIDENCE:
        assert line in whole
    assert ADVICE in whole
    assert "head-of-line at sink: shares a TCP connection with enrich" in whole


def test_subtasks_are_listed_only_under_vertices_with_several() -> None:
    lines = text_of(skewed_report(), 120).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["source"])
    assert [ln.split()[0] for ln in lines[start : start + 9]] == [
        "source",
        "[0]",
        "[1]",
        "enrich",
        "[0]",
        "[1]",
        "[2]",
        "[3]",
        "sink",
    ]
    assert lines[start].startswith("source")
    assert lines[start + 1].startswith("  [0]")  # indented under its vertex
    assert lines[start + 9].split()[:1] != ["[0]"]  # the sink has one subtask: no rows


def test_missing_values_show_as_a_dash() -> None:
    lines = text_of(skewed_report(), 120).splitlines()
    sink = next(ln for ln in lines if ln.split()[:1] == ["sink"])
    # busy, idle, out pool, in pool and rec/s out are unknown for the sink
    assert sink.split().count("\u2013") == 5  # an en dash


def test_levels_are_coloured() -> None:
    out = text_of(skewed_report(), 120, color=True)
    assert "\x1b[1;31mHIGH" in out
    assert "\x1b[33mLOW" in out
    assert "\x1b[32mOK" in out


def all_ok(report: Report) -> Report:
    """``report`` with every vertex and subtask OK and no root cause."""
    return replace(
        report,
        root_causes=(),
        findings=(),
        vertices=tuple(
            replace(
                v,
                level="OK",
                ratio=0.0,
                subtasks=tuple(replace(s, level="OK", ratio=0.0) for s in v.subtasks),
            )
            for v in report.vertices
        ),
    )


def test_no_backpressure_and_no_diagnosis_are_said_plainly() -> None:
    assert "No backpressure: every vertex is OK." in text_of(all_ok(skewed_report()), 80)
    undiagnosed = text_of(replace(skewed_report(), root_causes=None), 80)
    assert "no diagnosis" in undiagnosed
    assert "No backpressure" not in undiagnosed


@pytest.mark.parametrize("width", [80, 120])
def test_backpressure_without_a_root_cause_is_never_called_no_backpressure(width: int) -> None:
    # source is HIGH and sink LOW, yet the rules named no root cause (only findings).
    shown = flat(text_of(skewed_report(root_causes=()), width))
    assert "No backpressure" not in shown
    assert "Backpressure without a root cause: source is HIGH (0.97), sink is LOW (0.31)" in shown
    md = render_markdown(skewed_report(()))
    assert "No backpressure" not in md
    assert "Backpressure without a root cause: source is HIGH (0.97)" in md


def test_a_vertex_without_figures_is_not_called_ok() -> None:
    report = all_ok(skewed_report())
    blind = replace(report.vertices[2], level=None, ratio=None)
    shown = flat(text_of(replace(report, vertices=(*report.vertices[:2], blind)), 120))
    assert "every vertex is OK" not in shown
    assert "sink gave no figures" in shown


def test_names_are_shown_as_written_not_as_markup() -> None:
    report = skewed_report()
    odd = VertexStatus("[bold]enrich[/bold]", 1, "OK", 0.0)
    shown = text_of(Report(report.run_id, report.job, report.source, report.window, (odd,)), 120)
    assert "[bold]enrich[/bold]" in shown


def test_markdown_has_one_table_row_per_vertex_and_subtask() -> None:
    md = render_markdown(skewed_report())
    rows = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert rows[0].split("|")[1:-1] == [
        " vertex ",
        " level ",
        " ratio ",
        " busy ",
        " idle ",
        " out pool ",
        " in pool ",
        " rec/s in ",
        " rec/s out ",
    ]
    assert set(rows[1]) <= set("|:-")
    assert len(rows) == 2 + 3 + 2 + 4  # header, separator, 3 vertices, 2 + 4 subtasks
    assert all(row.count("|") == 10 for row in rows)
    assert rows[2].startswith("| **source** | HIGH | 0.97 |")
    assert "### Root causes" in md
    assert "data-skew at enrich" in md
    assert "- enrich\\[0\\] receives 61% of the records of enrich" in md
    assert "### Findings" in md


def test_markdown_escapes_pipes_in_names() -> None:
    report = skewed_report()
    odd = VertexStatus("a|b", 1, "OK", 0.0)
    md = render_markdown(Report(report.run_id, report.job, report.source, report.window, (odd,)))
    row = next(ln for ln in md.splitlines() if ln.startswith("| **a"))
    assert row.replace("\\|", "").count("|") == 10


def test_markdown_says_when_there_is_no_backpressure_or_no_diagnosis() -> None:
    assert "No backpressure: every vertex is OK." in render_markdown(all_ok(skewed_report()))
    assert "no diagnosis" in render_markdown(replace(skewed_report(), root_causes=None))


def test_json_rendering_is_the_report_document() -> None:
    doc = json.loads(render_json(skewed_report()))
    assert doc["schema"] == "bpmon.report/1"
    assert [v["name"] for v in doc["vertices"]] == ["source", "enrich", "sink"]
    assert doc["root_causes"][0]["kind"] == "data-skew"


def flink_named_report() -> Report:
    """The skewed report with the long, many-word vertex names of a Flink job graph."""
    report = skewed_report()
    names = {
        "source": "Source: Kafka Source -> Timestamps/Watermarks",
        "enrich": "Window(TumblingEventTimeWindows(60000), EventTimeTrigger, Agg)",
        "sink": "Sink: Writer -> Sink: Committer",
    }
    return replace(
        report,
        vertices=tuple(replace(v, name=names[v.name]) for v in report.vertices),
        root_causes=(replace(report.root_causes[0], vertex=names["enrich"]),),  # type: ignore[index]
    )


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("make", [skewed_report, flink_named_report])
def test_the_report_fits_the_terminal_without_breaking_a_word(
    width: int, make: Callable[[], Report], fits: Fits
) -> None:
    out = fits(lambda console: render_text(make(), console), width, NOTE)
    assert "largest subtask's" in flat(out)  # the vertex rows' max is said
    if make is skewed_report:  # short names: every column is there, headers whole
        assert "too narrow" not in out
        for header in ("out", "pool", "rec/s", "ratio", "busy", "idle"):
            assert header in out.split()


@pytest.mark.parametrize("width", [80, 120])
def test_the_live_view_and_the_comparison_fit_without_breaking_a_word(
    width: int, fits: Fits
) -> None:
    report = skewed_report()
    snapshot = LiveSnapshot(3.25, "sampling", report.vertices)
    out = fits(lambda console: console.print(live_table("slow-enrich", snapshot, width)), width)
    assert "slow-enrich — 3.2 s" in flat(out)
    assert "[0]" not in out  # one row per vertex
    assert "pool" in out.split() and "outPo…" not in out
    other = flink_named_report()
    fits(lambda console: render_comparison(report, report, "enrich.parallelism=6", console), width)
    fits(lambda console: render_comparison(other, other, "x.parallelism=6", console), width, NOTE)


def test_a_table_too_narrow_for_every_column_leaves_the_spare_ones_and_says_so(
    fits: Fits,
) -> None:
    out = fits(lambda console: render_text(flink_named_report(), console), 70, NOTE)
    assert "too narrow for:" in out and "--json has them" in flat(out)
    assert "vertex" in out and "level" in out  # never dropped


def test_fit_table_keeps_every_column_when_there_is_room_and_drops_the_spare_first() -> None:
    cols = [Col("name"), Col("a", drop=1), Col("b", drop=2), Col("c")]
    rows = [["a-long-name here", "1111", "2222", "3333"]]
    assert kept_columns(cols, rows, 80) == [0, 1, 2, 3]
    # least widths 9 + 4 + 4 + 4 and gaps 6 = 27: one column too many at 24, two at 20
    assert kept_columns(cols, rows, 24) == [0, 1, 3]
    assert kept_columns(cols, rows, 20) == [0, 3]
    _, kept = fit_table(cols, rows, 20)
    assert [c.header for c in kept] == ["name", "c"]
