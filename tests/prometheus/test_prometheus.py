"""The Prometheus collector: what a scrape of its private registry exposes, and what it leaves out.

Reports are real model values: built by hand where a test needs an exact shape (a value the
target could not give, two reports of one job), and one from a real run of a bottlenecked scenario
on bpmon's runtime. The exposition is read back with prometheus_client's own parser and linted
by the real ``promtool check metrics``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    Summary,
    generate_latest,
)
from prometheus_client.parser import text_string_to_metric_families

from bpmon.model.values import Metrics, Report, RootCause, SubtaskStatus, VertexStatus, Window
from bpmon.prometheus import exposition, make_registry

END = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _report(job: str = "j", end: datetime = END) -> Report:
    """A small diagnosed report: vertex ``a`` (two subtasks, HIGH) feeding ``b`` (OK)."""
    full = Metrics(busy_ratio=0.1, idle_ratio=0.2, backpressured_time_ratio=0.7,
                   out_pool_usage=1.2, in_pool_usage=0.5, records_in_per_s=10.0,
                   records_out_per_s=20.0)  # fmt: skip
    a = VertexStatus("a", 2, "HIGH", 0.9, subtasks=(
        SubtaskStatus(0, "HIGH", 0.9, full),
        SubtaskStatus(1, None, None, Metrics(busy_ratio=0.3)),
    ))  # fmt: skip
    b = VertexStatus("b", 1, "OK", 0.0, subtasks=(SubtaskStatus(0, "OK", 0.0, full),))
    cause = RootCause("b", "slow-operator", (0,), 0.876, recommended_parallelism=4)
    window = Window(end - timedelta(seconds=5), end, 100, 50.0, 3.0)
    return Report(f"run-{job}", job, "runtime", window, (a, b), root_causes=(cause,))


def _scrape(
    reports: Sequence[Report], counters: dict[str, float] | None = None, now: datetime = END
) -> Series:
    """Every sample of one scrape, keyed by name and label set."""
    registry = make_registry(lambda: reports, lambda: counters or {}, now=lambda: now)
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(series: Series, name: str, **labels: str) -> float | None:
    return series.get((name, frozenset(labels.items())))


def _names(series: Series) -> set[str]:
    return {name for name, _ in series}


def test_every_subtask_metric_carries_job_vertex_and_subtask() -> None:
    series = _scrape([_report()])
    where = {"job": "j", "vertex": "a", "subtask": "0"}
    expected = {
        "bpmon_subtask_backpressure_ratio": 0.9,
        "bpmon_subtask_backpressure_severity": 2.0,
        "bpmon_subtask_busy_time_ratio": 0.1,
        "bpmon_subtask_idle_time_ratio": 0.2,
        "bpmon_subtask_backpressured_time_ratio": 0.7,
        "bpmon_subtask_out_pool_usage_ratio": 1.2,
        "bpmon_subtask_in_pool_usage_ratio": 0.5,
        "bpmon_subtask_records_in_per_second": 10.0,
        "bpmon_subtask_records_out_per_second": 20.0,
    }
    assert {name: _value(series, name, **where) for name in expected} == expected


def test_a_value_the_report_does_not_have_is_left_out_never_zero() -> None:
    series = _scrape([_report()])
    where = {"job": "j", "vertex": "a", "subtask": "1"}
    assert _value(series, "bpmon_subtask_busy_time_ratio", **where) == 0.3
    for name in (
        "bpmon_subtask_backpressure_ratio",
        "bpmon_subtask_idle_time_ratio",
        "bpmon_subtask_out_pool_usage_ratio",
        "bpmon_subtask_records_in_per_second",
    ):
        assert _value(series, name, **where) is None, name  # fmt: skip

    undiagnosed = replace(_report(), root_causes=None, window=Window(END, END, 0, 0.0))
    names = _names(_scrape([undiagnosed]))
    assert "bpmon_root_causes" not in names and "bpmon_root_cause_info" not in names
    assert "bpmon_window_jitter_p99_seconds" not in names


def test_the_level_is_a_number_and_a_state_set_with_one_state_on() -> None:
    series = _scrape([_report()])
    for vertex, level, number in (("a", "high", 2.0), ("b", "ok", 0.0)):
        assert _value(series, "bpmon_backpressure_severity", job="j", vertex=vertex) == number
        states = {
            state: _value(series, "bpmon_backpressure_level", job="j", vertex=vertex, level=state)
            for state in ("ok", "low", "high")
        }
        assert states == {s: float(s == level) for s in states}
    assert _value(series, "bpmon_backpressure_ratio", job="j", vertex="a") == 0.9


def test_the_root_cause_is_an_info_metric_with_its_confidence_also_a_gauge() -> None:
    series = _scrape([_report()])
    cause = {"job": "j", "vertex": "b", "kind": "slow-operator"}
    assert _value(series, "bpmon_root_cause_info", **cause, confidence="0.88") == 1.0
    assert _value(series, "bpmon_root_cause_confidence_ratio", **cause) == 0.876
    assert _value(series, "bpmon_root_cause_recommended_parallelism", **cause) == 4.0
    assert _value(series, "bpmon_root_causes", job="j") == 1.0

    healthy = _scrape([replace(_report(), root_causes=())])
    assert _value(healthy, "bpmon_root_causes", job="j") == 0.0
    assert "bpmon_root_cause_info" not in _names(healthy)


def test_the_window_is_exported_in_base_units_and_the_age_uses_the_given_clock() -> None:
    series = _scrape([_report()], now=END + timedelta(seconds=42))
    assert _value(series, "bpmon_window_samples", job="j") == 100.0
    assert _value(series, "bpmon_window_interval_seconds", job="j") == 0.05
    assert _value(series, "bpmon_window_jitter_p99_seconds", job="j") == 0.003
    assert _value(series, "bpmon_report_timestamp_seconds", job="j") == END.timestamp()
    assert _value(series, "bpmon_report_age_seconds", job="j") == 42.0
    info = {"job": "j", "run_id": "run-j", "source": "runtime", "levels_from": "samples"}
    assert _value(series, "bpmon_report_info", **info) == 1.0


def test_bpmon_counters_are_exported_as_totals_and_a_bad_name_is_refused() -> None:
    series = _scrape([], {"bursts": 7, "diagnoses": 6, "errors_total": 1})
    assert _value(series, "bpmon_bursts_total") == 7.0
    assert _value(series, "bpmon_diagnoses_total") == 6.0
    assert _value(series, "bpmon_errors_total") == 1.0
    with pytest.raises(ValueError, match="'Bad-Name': not a Prometheus name part"):
        _scrape([], {"Bad-Name": 1})


def test_one_report_per_job_the_newest_and_every_scrape_reads_afresh() -> None:
    older = replace(_report(end=END - timedelta(minutes=1)), root_causes=())
    reports: list[Report] = [_report(end=END), older, _report("k")]
    registry = make_registry(lambda: reports, dict, now=lambda: END)
    first = generate_latest(registry).decode()
    assert first.count('bpmon_root_causes{job="j"} 1.0') == 1
    assert 'bpmon_root_causes{job="k"}' in first

    reports[:] = [older]
    second = generate_latest(registry).decode()
    assert 'bpmon_root_causes{job="j"} 0.0' in second and 'job="k"' not in second


def test_the_registry_is_private_and_each_one_stands_alone() -> None:
    before = {m.name for m in REGISTRY.collect()}
    one = make_registry(lambda: [_report("one")], dict)
    two = make_registry(lambda: [_report("two")], dict)
    assert {m.name for m in REGISTRY.collect()} == before
    assert 'job="two"' not in generate_latest(one).decode()
    assert 'job="one"' not in generate_latest(two).decode()


def test_a_real_report_exposes_its_diagnosis(bottleneck_report: Report) -> None:
    series = _scrape([bottleneck_report])
    assert _value(series, "bpmon_backpressure_severity", job="slowjob", vertex="src") == 2.0
    cause = {"job": "slowjob", "vertex": "work", "kind": "slow-operator"}
    assert _value(series, "bpmon_root_cause_confidence_ratio", **cause) is not None
    subtasks = sum(v.parallelism for v in bottleneck_report.vertices)
    busy = [k for k in series if k[0] == "bpmon_subtask_busy_time_ratio"]
    assert len(busy) == subtasks == 5


def test_promtool_finds_nothing_to_fix_in_the_exposition(
    bottleneck_report: Report, promtool: Path
) -> None:
    registry = make_registry(
        lambda: [bottleneck_report, _report()], lambda: {"bursts": 1, "errors": 0}
    )
    done = subprocess.run(
        [promtool, "check", "metrics"],
        input=generate_latest(registry),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr).decode()


def test_exposition_writes_what_prometheus_client_writes_byte_for_byte(
    bottleneck_report: Report,
) -> None:
    odd = replace(_report('we"ird\\job\nname-é'), run_id='run "1"')
    for reports in ([], [bottleneck_report], [bottleneck_report, _report(), odd]):
        registry = make_registry(partial(list, reports), lambda: {"bursts": 3}, now=lambda: END)
        assert exposition(registry) == generate_latest(registry)


def test_exposition_handles_every_family_prometheus_client_makes() -> None:
    # Not bpmon's own families: counters' and histograms' _created samples, summaries, help text
    # with a backslash and a newline, escaped label values.
    registry = CollectorRegistry()
    Counter("c_things", "a \\ and\na newline", ["a"], registry=registry).labels('x"y').inc(3)
    Histogram("h_seconds", "h", registry=registry).observe(0.3)
    Summary("s_bytes", "s", registry=registry).observe(5)
    assert exposition(registry) == generate_latest(registry)
