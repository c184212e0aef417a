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
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.parser import text_string_to_metric_families

from bpmon.model.autoscaler import AutoscalerReport, AutoscalerVerdict, AutoscalerVertex
from bpmon.model.checkpoints import CheckpointPhases, CheckpointReport, LastCheckpoint
from bpmon.model.counters import ServiceCounters
from bpmon.model.values import (
    Finding,
    Metrics,
    Report,
    RootCause,
    SubtaskStatus,
    VertexStatus,
    Window,
)
from bpmon.prometheus import exposition, make_registry
from tests.prometheus.conftest import CHECKPOINTS_HELD_BY, SCALED_INEFFECTIVELY

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


def _checkpointed(job: str = "j") -> Report:
    """:func:`_report` with checkpoints: the newest failed after 4 s, held behind the data ``b``
    (the root cause) holds up; ``b``'s barrier never arrived, so its alignment is unknown."""
    last = LastCheckpoint(
        id=7, status="failed", duration_ms=4000.0, start_delay_ms=3900.0, alignment_ms=100.0,
        sync_ms=0.0, async_ms=0.0, state_bytes=0, persisted_bytes=0, barrier_wait_ms=3950.0,
        failure="expired before completing",
    )  # fmt: skip
    vertices = (
        CheckpointPhases(name="a", start_delay_ms=12.0, alignment_ms=3.5, sync_ms=1.0,
                         async_ms=2.0, acknowledged=2, parallelism=2),
        CheckpointPhases(name="b", start_delay_ms=4000.0, alignment_ms=None, sync_ms=None,
                         async_ms=None, acknowledged=0, parallelism=1),
    )  # fmt: skip
    checkpoints = CheckpointReport(
        mode="aligned", interval_ms=1000.0, completed=5, failed=3, last=last, vertices=vertices
    )
    held = Finding("checkpoint-backpressure", "b", "checkpoint 7 failed after 4,000 ms, ...")
    return replace(_report(job), checkpoints=checkpoints, findings=(held,))


def _autoscaled(job: str = "j", end: datetime = END) -> Report:
    """:func:`_report` with the autoscaler's opinion: it would scale ``a`` down 2 -> 1 and the
    root cause ``b`` (bpmon sized 4) up 1 -> 9, which over-provisions it."""
    vertices = (
        AutoscalerVertex("a", load=0.1, true_processing_rate=100.0, target_rate=10.0,
                         catch_up_rate=0.0, parallelism=2, recommended_parallelism=1,
                         outside=True, delayed=True),
        AutoscalerVertex("b", load=1.0, true_processing_rate=10.0, target_rate=60.0,
                         catch_up_rate=5.0, parallelism=1, recommended_parallelism=9,
                         outside=True),
    )  # fmt: skip
    verdict = AutoscalerVerdict("b", "over-provisions", "it would scale b 1 -> 9, 5 more ...")
    autoscaler = AutoscalerReport({}, vertices, (verdict,), acts=True)
    return replace(_report(job, end), autoscaler=autoscaler)


def _scrape(
    reports: Sequence[Report], counters: ServiceCounters | None = None, now: datetime = END
) -> Series:
    """Every sample of one scrape, keyed by name and label set."""
    registry = make_registry(
        lambda: reports, lambda: counters or ServiceCounters(), now=lambda: now
    )
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


def _per_vertex(series: Series, name: str, job: str, *vertices: str) -> dict[str, float | None]:
    return {vertex: _value(series, name, job=job, vertex=vertex) for vertex in vertices}


def _held(series: Series, job: str, *vertices: str) -> dict[str, float | None]:
    return _per_vertex(series, "bpmon_checkpoint_held_by_backpressure", job, *vertices)


def _disagreements(series: Series, job: str) -> dict[tuple[str, str], float]:
    """``bpmon_autoscaler_disagreement`` of ``job``, by (vertex, verdict)."""
    found = {}
    for (name, labels), value in series.items():
        where = dict(labels)
        if name == "bpmon_autoscaler_disagreement" and where["job"] == job:
            assert set(where) == {"job", "vertex", "verdict"}, where
            found[where["vertex"], where["verdict"]] = value
    return found


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


CHECKPOINT_FAMILIES = (
    "bpmon_checkpoint_duration_seconds",
    "bpmon_checkpoint_barrier_wait_seconds",
    "bpmon_checkpoint_failed_total",
    "bpmon_checkpoint_start_delay_seconds",
    "bpmon_checkpoint_alignment_seconds",
    "bpmon_checkpoint_held_by_backpressure",
)


def test_the_newest_checkpoint_is_exported_in_seconds_per_job_and_per_vertex() -> None:
    series = _scrape([_checkpointed()])
    assert _value(series, "bpmon_checkpoint_duration_seconds", job="j") == 4.0
    assert _value(series, "bpmon_checkpoint_barrier_wait_seconds", job="j") == 3.95
    assert _value(series, "bpmon_checkpoint_failed_total", job="j") == 3.0
    delay, alignment = "bpmon_checkpoint_start_delay_seconds", "bpmon_checkpoint_alignment_seconds"
    assert _per_vertex(series, delay, "j", "a", "b") == {"a": 0.012, "b": 4.0}
    # b's alignment is not known: left out, never 0.
    assert _per_vertex(series, alignment, "j", "a", "b") == {"a": 0.0035, "b": None}
    assert _held(series, "j", "a", "b") == {"a": 0.0, "b": 1.0}
    exported = {name for name, _ in series if name.startswith("bpmon_checkpoint_")}
    assert exported == set(CHECKPOINT_FAMILIES)


def test_held_by_backpressure_follows_the_finding_and_nothing_else() -> None:
    quick = replace(_checkpointed(), findings=(Finding("checkpoint-slow", "a", "the upload"),))
    series = _scrape([quick])
    assert _held(series, "j", "a", "b") == {"a": 0.0, "b": 0.0}
    # A finding on a vertex the checkpoint does not list still gets its series.
    elsewhere = replace(_checkpointed(), findings=(Finding("checkpoint-backpressure", "c", "."),))
    series = _scrape([elsewhere])
    assert _value(series, "bpmon_checkpoint_held_by_backpressure", job="j", vertex="c") == 1.0
    assert _value(series, "bpmon_checkpoint_held_by_backpressure", job="j", vertex="b") == 0.0


def test_no_checkpoint_metric_without_checkpoints_or_a_checkpoint_that_ended(
    bottleneck_report: Report,
) -> None:
    assert bottleneck_report.checkpoints is None  # BOTTLENECK takes no checkpoints
    checkpointed = _checkpointed()
    assert checkpointed.checkpoints is not None
    none_yet = replace(
        checkpointed, checkpoints=replace(checkpointed.checkpoints, last=None, vertices=())
    )
    for report in (_report(), bottleneck_report, none_yet):
        names = _names(_scrape([report]))
        assert "bpmon_report_info" in names
        assert not {n for n in names if n.startswith("bpmon_checkpoint_")}, report.job
    # One job's checkpoints do not make another's.
    series = _scrape([_checkpointed("k"), _report()])
    assert _value(series, "bpmon_checkpoint_duration_seconds", job="k") == 4.0
    assert not [labels for name, labels in series if name.startswith("bpmon_checkpoint_")
                and ("job", "j") in labels]  # fmt: skip


def test_failed_checkpoints_are_a_counter_in_both_text_formats() -> None:
    registry = make_registry(lambda: [_checkpointed()], ServiceCounters, now=lambda: END)
    text = generate_latest(registry).decode()
    assert "# TYPE bpmon_checkpoint_failed_total counter\n" in text
    assert 'bpmon_checkpoint_failed_total{job="j"} 3.0\n' in text
    assert "bpmon_checkpoint_failed_created" not in text
    (family,) = [f for f in text_string_to_metric_families(text)
                 if f.name == "bpmon_checkpoint_failed"]  # fmt: skip
    assert family.type == "counter"
    # OpenMetrics (what Prometheus negotiates) names the family without _total, its sample with.
    open_text = openmetrics_latest(registry).decode()
    assert "# TYPE bpmon_checkpoint_failed counter\n" in open_text
    assert 'bpmon_checkpoint_failed_total{job="j"} 3.0\n' in open_text


@pytest.mark.slow
def test_a_real_checkpoint_report_exports_its_own_figures(checkpoint_report: Report) -> None:
    checkpoints = checkpoint_report.checkpoints
    assert checkpoints is not None and checkpoints.last is not None
    last, job = checkpoints.last, checkpoint_report.job
    series = _scrape([checkpoint_report])
    assert _value(series, "bpmon_checkpoint_duration_seconds", job=job) == last.duration_ms / 1000
    assert last.barrier_wait_ms is not None
    wait = _value(series, "bpmon_checkpoint_barrier_wait_seconds", job=job)
    assert wait == last.barrier_wait_ms / 1000
    assert _value(series, "bpmon_checkpoint_failed_total", job=job) == checkpoints.failed >= 1
    names = [row.name for row in checkpoints.vertices]
    assert names == [v.name for v in checkpoint_report.vertices]
    for name, field in (
        ("bpmon_checkpoint_start_delay_seconds", lambda r: r.start_delay_ms),
        ("bpmon_checkpoint_alignment_seconds", lambda r: r.alignment_ms),
    ):
        expected = {
            row.name: None if field(row) is None else field(row) / 1000
            for row in checkpoints.vertices
        }
        assert _per_vertex(series, name, job, *names) == expected, name
    # The example's story: its checkpoints wait behind the data its root cause holds up.
    blamed = {f.vertex for f in checkpoint_report.findings if f.kind == "checkpoint-backpressure"}
    assert blamed == {CHECKPOINTS_HELD_BY}, checkpoint_report.findings
    assert _held(series, job, *names) == {v: float(v in blamed) for v in names}
    registry = make_registry(lambda: [checkpoint_report], ServiceCounters, now=lambda: END)
    assert exposition(registry) == generate_latest(registry)


DISAGREEMENT_KINDS = (
    "scales-ineffectively",
    "scales-wrong-vertex",
    "scales-down-bottleneck",
    "misses",
    "over-provisions",
)
"""The verdicts docs/report.md lists, but ``agrees``: the ``verdict`` label's values."""


def _all_zero(*vertices: str) -> dict[tuple[str, str], float]:
    return {(vertex, kind): 0.0 for vertex in vertices for kind in DISAGREEMENT_KINDS}


def test_the_autoscalers_parallelism_and_disagreement_are_exported_per_vertex() -> None:
    series = _scrape([_autoscaled()])
    recommended = "bpmon_autoscaler_recommended_parallelism"
    assert _per_vertex(series, recommended, "j", "a", "b") == {"a": 1.0, "b": 9.0}
    # A state set over the five disagreements: 1 for the verdict, 0 for the others and for a,
    # which has no verdict (a scale-down of a vertex that is no cause is judged nowhere).
    assert _disagreements(series, "j") == {**_all_zero("a", "b"), ("b", "over-provisions"): 1.0}
    # The current parallelism stays bpmon_vertex_parallelism's, not exported a second time.
    assert _per_vertex(series, "bpmon_vertex_parallelism", "j", "a", "b") == {"a": 2.0, "b": 1.0}
    exported = {name for name, _ in series if name.startswith("bpmon_autoscaler_")}
    assert exported == {recommended, "bpmon_autoscaler_disagreement"}


def test_an_agreeing_autoscaler_reads_0_everywhere_and_every_verdict_counts() -> None:
    autoscaled = _autoscaled()
    assert autoscaled.autoscaler is not None
    agrees = AutoscalerVerdict("b", "agrees", "it would scale b 1 -> 4 (bpmon: 4)")
    agreeing = replace(autoscaled, autoscaler=replace(autoscaled.autoscaler, verdicts=(agrees,)))
    series = _scrape([agreeing])
    assert _disagreements(series, "j") == _all_zero("a", "b")
    assert not [labels for name, labels in series if ("verdict", "agrees") in labels]
    # Two verdicts at one vertex (two causes there) are both 1; a verdict on a vertex the
    # autoscaler did not list still gets its five series.
    two = (
        AutoscalerVerdict("b", "misses", "."),
        AutoscalerVerdict("b", "scales-ineffectively", "."),
        AutoscalerVerdict("c", "scales-wrong-vertex", "."),
    )
    both = replace(autoscaled, autoscaler=replace(autoscaled.autoscaler, verdicts=two))
    assert _disagreements(_scrape([both]), "j") == {
        **_all_zero("a", "b", "c"),
        ("b", "misses"): 1.0,
        ("b", "scales-ineffectively"): 1.0,
        ("c", "scales-wrong-vertex"): 1.0,
    }


def test_no_autoscaler_metric_without_an_opinion_nor_from_an_older_report() -> None:
    without = _report()
    assert without.autoscaler is None
    names = _names(_scrape([without]))
    assert "bpmon_vertex_parallelism" in names
    assert not {n for n in names if n.startswith("bpmon_autoscaler_")}
    # The newest report has no opinion (a saturated runtime, say): the older one's is not shown.
    older = _autoscaled(end=END - timedelta(minutes=1))
    reports: list[Report] = [older, without]
    registry = make_registry(lambda: reports, ServiceCounters, now=lambda: END)
    text = exposition(registry).decode()
    assert not [line for line in text.splitlines() if line.startswith("bpmon_autoscaler_")]
    # Read afresh at every scrape: an opinion comes back with the report that has it, then goes.
    reports[:] = [older]
    text = exposition(registry).decode()
    assert 'bpmon_autoscaler_recommended_parallelism{job="j",vertex="b"} 9.0\n' in text
    reports[:] = [older, without]
    text = exposition(registry).decode()
    assert not [line for line in text.splitlines() if line.startswith("bpmon_autoscaler_")]
    # One job's opinion does not make another's.
    series = _scrape([_autoscaled("k"), _report()])
    assert _value(series, "bpmon_autoscaler_recommended_parallelism", job="k", vertex="b") == 9.0
    assert not [labels for name, labels in series if name.startswith("bpmon_autoscaler_")
                and ("job", "j") in labels]  # fmt: skip


@pytest.mark.slow
def test_a_real_hot_key_report_exports_the_autoscalers_ineffective_scale_up(
    hot_key_report: Report,
) -> None:
    autoscaler, job = hot_key_report.autoscaler, hot_key_report.job
    assert autoscaler is not None
    series = _scrape([hot_key_report])
    names = [row.name for row in autoscaler.vertices]
    assert names == [v.name for v in hot_key_report.vertices]
    recommended = _per_vertex(series, "bpmon_autoscaler_recommended_parallelism", job, *names)
    assert recommended == {row.name: row.recommended_parallelism for row in autoscaler.vertices}
    # The example's story: 4 subtasks of aggregate, which the autoscaler would widen for nothing.
    assert (recommended[SCALED_INEFFECTIVELY] or 0) > 4
    disagreements = _disagreements(series, job)
    assert len(disagreements) == 5 * len(names)
    held = {key for key, value in disagreements.items() if value == 1.0}
    assert (SCALED_INEFFECTIVELY, "scales-ineffectively") in held
    judged = {(v.vertex, v.verdict) for v in autoscaler.verdicts if v.verdict != "agrees"}
    assert held == judged, autoscaler.verdicts
    assert set(disagreements.values()) == {0.0, 1.0}
    registry = make_registry(lambda: [hot_key_report], ServiceCounters, now=lambda: END)
    assert exposition(registry) == generate_latest(registry)


def test_bpmon_counters_are_exported_as_totals_each_with_its_help() -> None:
    counters = ServiceCounters(bursts=7, diagnoses=6, errors=1, watches_started=2)
    series = _scrape([], counters)
    assert _value(series, "bpmon_bursts_total") == 7.0
    assert _value(series, "bpmon_diagnoses_total") == 6.0
    assert _value(series, "bpmon_errors_total") == 1.0
    assert _value(series, "bpmon_watches_started_total") == 2.0
    text = exposition(make_registry(list, lambda: counters)).decode()
    assert "# HELP bpmon_errors_total Watches or bursts that failed with an error" in text
    assert "# HELP bpmon_watches_started_total Watches (of a scenario or a process)" in text


def test_one_report_per_job_the_newest_and_every_scrape_reads_afresh() -> None:
    older = replace(_report(end=END - timedelta(minutes=1)), root_causes=())
    reports: list[Report] = [_report(end=END), older, _report("k")]
    registry = make_registry(lambda: reports, ServiceCounters, now=lambda: END)
    first = generate_latest(registry).decode()
    assert first.count('bpmon_root_causes{job="j"} 1.0') == 1
    assert 'bpmon_root_causes{job="k"}' in first

    reports[:] = [older]
    second = generate_latest(registry).decode()
    assert 'bpmon_root_causes{job="j"} 0.0' in second and 'job="k"' not in second


def test_the_registry_is_private_and_each_one_stands_alone() -> None:
    before = {m.name for m in REGISTRY.collect()}
    one = make_registry(lambda: [_report("one")], ServiceCounters)
    two = make_registry(lambda: [_report("two")], ServiceCounters)
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


PLANNER_NAME = (
    "Calc(select=[CONCAT(name, _UTF-16LE'\"', tag, '\\'), amount], where=[(amount > 0)])"
    ' -> Sink: Writer\n(table=[default_catalog.db."orders"]) [é]'
)
"""A vertex name as Flink SQL's planner writes it without simplified names: quotes, backslashes,
brackets, a newline, non-ASCII, every character a Prometheus label value must escape."""


def test_promtool_finds_nothing_to_fix_in_the_exposition(
    bottleneck_report: Report, promtool: Path
) -> None:
    odd = replace(_checkpointed('we"ird\\job\nname-é'), autoscaler=_autoscaled().autoscaler)
    plain = _report("sql")
    planner = replace(
        plain,
        vertices=(plain.vertices[0], replace(plain.vertices[1], name=PLANNER_NAME)),
        root_causes=tuple(replace(c, vertex=PLANNER_NAME) for c in plain.root_causes or ()),
    )
    registry = make_registry(
        lambda: [bottleneck_report, _report(), _checkpointed("k"), _autoscaled("m"), odd, planner],
        lambda: ServiceCounters(bursts=1),
    )
    text = generate_latest(registry)
    assert b"Calc(select=[CONCAT(name" in text  # the full name, escaped, not dropped
    _promtool_check_metrics(promtool, text)


@pytest.mark.slow
def test_promtool_finds_nothing_to_fix_in_a_real_checkpoint_exposition(
    checkpoint_report: Report, promtool: Path
) -> None:
    registry = make_registry(lambda: [checkpoint_report], lambda: ServiceCounters(bursts=1))
    text = exposition(registry)
    assert b"bpmon_checkpoint_failed_total{" in text
    _promtool_check_metrics(promtool, text)


@pytest.mark.slow
def test_promtool_finds_nothing_to_fix_in_a_real_autoscaler_exposition(
    hot_key_report: Report, promtool: Path
) -> None:
    registry = make_registry(lambda: [hot_key_report], lambda: ServiceCounters(bursts=1))
    text = exposition(registry)
    assert b'bpmon_autoscaler_disagreement{job="hot-customer",' in text
    _promtool_check_metrics(promtool, text)


def _promtool_check_metrics(promtool: Path, text: bytes) -> None:
    """``promtool check metrics`` (its linter: names, units, counters' ``_total``) passes."""
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, (done.stdout + done.stderr).decode()


def test_exposition_writes_what_prometheus_client_writes_byte_for_byte(
    bottleneck_report: Report,
) -> None:
    odd = replace(
        _checkpointed('we"ird\\job\nname-é'), run_id='run "1"', autoscaler=_autoscaled().autoscaler
    )
    for reports in (
        [],
        [bottleneck_report],
        [bottleneck_report, _report(), _checkpointed("k"), _autoscaled("m"), odd],
    ):
        registry = make_registry(
            partial(list, reports), lambda: ServiceCounters(bursts=3), now=lambda: END
        )
        assert exposition(registry) == generate_latest(registry)


def test_exposition_handles_every_family_prometheus_client_makes() -> None:
    # Not bpmon's own families: counters' and histograms' _created samples, summaries, help text
    # with a backslash and a newline, escaped label values.
    registry = CollectorRegistry()
    Counter("c_things", "a \\ and\na newline", ["a"], registry=registry).labels('x"y').inc(3)
    Histogram("h_seconds", "h", registry=registry).observe(0.3)
    Summary("s_bytes", "s", registry=registry).observe(5)
    assert exposition(registry) == generate_latest(registry)
