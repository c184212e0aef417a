"""A runtime window cut down to what another target shows, and the report saying what is missing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bpmon.collectors.views import observed_as
from bpmon.model.errors import ConfigError
from bpmon.model.signals import FLINK, PYSPY, RUNTIME, Signal, SourceBacklog, Spill, TaskScheduling
from bpmon.model.values import Metrics, Report, SubtaskWindow
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, drain, run_scenario
from tests.tiny import TINY

from ..rules.observations import observation, sub, vertex

FULL = Metrics(
    busy_ratio=0.5,
    idle_ratio=0.2,
    backpressured_time_ratio=0.3,
    out_pool_usage=1.0,
    in_pool_usage=0.1,
    records_in_per_s=10.0,
    records_out_per_s=10.0,
    backlog=SourceBacklog(pending_records=5.0, growth_per_s=1.0),
    spill=Spill(written_bytes_per_s=1e6),
    scheduling=TaskScheduling(state="RUNNING"),
)


def test_flink_keeps_its_metrics_and_loses_channels_and_spill() -> None:
    whole = observation(vertex("src", SubtaskWindow(index=0, thread="t", metrics=FULL)))
    assert observed_as(whole, RUNTIME) == whole
    with_all = observed_as(whole, FLINK)
    m = with_all.vertices[0].subtasks[0].metrics
    assert (m.busy_ratio, m.out_pool_usage, m.records_in_per_s) == (0.5, 1.0, 10.0)
    assert m.backlog == FULL.backlog and m.scheduling == FULL.scheduling
    assert m.spill is None
    assert with_all.signals == FLINK and with_all.channels == ()


def test_pyspy_keeps_the_samples_alone() -> None:
    chained = replace(sub(0, bp=0.4, busy=0.5, rout=3.0, out_pool=1.0), chain_samples=(10, 40))
    seen = observed_as(observation(vertex("src", chained)), PYSPY).vertices[0].subtasks[0]
    assert (seen.samples, seen.backpressured, seen.busy) == (100, 40, 50)
    assert seen.chain_samples == (10, 40)  # py-spy reads the same stacks
    assert seen.metrics == Metrics()
    bare = observed_as(observation(vertex("src", chained)), frozenset({Signal.SAMPLES}))
    assert bare.vertices[0].subtasks[0].chain_samples == ()


def test_a_view_never_adds_what_was_not_observed() -> None:
    flink = observed_as(observation(vertex("src", sub(0))), FLINK)
    assert observed_as(flink, RUNTIME).signals == FLINK
    assert Signal.CHANNELS not in flink.signals


def _report(observe: str, tmp_path: Path) -> Report:
    events = run_scenario(parse_scenario(TINY), Settings(runs_dir=tmp_path), observe=observe)
    return drain(events).reports[0]


def test_a_runtime_report_has_nothing_unobserved(tmp_path: Path) -> None:
    assert not [f for f in _report("runtime", tmp_path).findings if f.kind == "unobserved"]


def test_a_pyspy_view_diagnoses_from_samples_and_says_what_it_lacks(tmp_path: Path) -> None:
    report = _report("pyspy", tmp_path)
    assert all(s.metrics.records_in_per_s is None for v in report.vertices for s in v.subtasks)
    [note] = [f for f in report.findings if f.kind == "unobserved"]
    assert note.vertex == "tiny"
    for lacking in ("busy and backpressured time", "record rates", "pendingRecords"):
        assert lacking in note.detail
    assert "spill" not in note.detail  # a pipelined job: spilling could not arise


def test_an_unknown_view_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--observe kafka: expected one of runtime, flink"):
        run_scenario(parse_scenario(TINY), Settings(runs_dir=tmp_path), observe="kafka")
