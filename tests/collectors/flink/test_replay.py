"""The whole Flink collector and the service's loop on recorded responses of a real cluster,
served by a real HTTP server (``fake_flink.py``): in a second, without Flink."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.flink.target import FlinkTarget
from bpmon.service.facade import Settings, drain, monitor_flink

from .fake_flink import recorded, serving


@pytest.fixture
def slow_sink() -> Iterator[str]:
    with serving(recorded("slow-sink")) as url:
        yield url


def test_one_window_of_the_recorded_slow_sink(slow_sink: str) -> None:
    target = FlinkTarget(slow_sink)
    target.start()
    observation = target.observe(samples=5, interval_ms=20)
    # all 5 dumps but where one overran its 20 ms slot on a loaded machine (then skipped)
    taken = observation.window.samples
    assert observation.source == "flink" and 1 <= taken <= 5
    light = observation.vertex("light").subtasks[0]
    # suspended in its mailbox in every dump, soft backpressured ~1000 ms/s: backpressured
    assert (light.samples, light.backpressured, light.idle) == (taken, taken, 0)
    assert (light.metrics.backpressured_time_ratio or 0) >= 0.9
    store = observation.vertex("store: Writer")
    assert store.kind == "sink" and store.subtasks[0].busy == taken
    [sampling] = [n for n in observation.notes if n.kind == "sampling"]
    assert sampling.detail.startswith(f"{taken} of 5 samples taken")
    assert target.last_dump_cost is not None and target.last_dump_cost.dumps == taken


def test_the_service_diagnoses_the_recorded_slow_sink(slow_sink: str, tmp_path: Path) -> None:
    ended = drain(
        monitor_flink(slow_sink, samples=5, interval_ms=20, settings=Settings(runs_dir=tmp_path))
    )
    [report] = ended.reports
    assert report.source == "flink" and report.job == "bpmon-slow-sink"
    assert report.root_causes is not None
    assert (report.root_causes[0].vertex, report.root_causes[0].kind) == (
        "store: Writer",
        "slow-sink",
    )
    assert {f.kind for f in report.findings} >= {"sampling"}


def test_a_disagreement_with_flinks_own_level_is_a_finding() -> None:
    """Flink's endpoint says HIGH for light; give it a dump where light is busy instead."""
    routes: dict[str, Any] = dict(recorded("slow-sink"))
    dump_path = next(p for p in routes if p.endswith("/thread-dump"))
    dump = json.loads(json.dumps(routes[dump_path][1]))
    store = next(t for t in dump["threadInfos"] if t["threadName"].startswith("store"))
    for t in dump["threadInfos"]:
        if t["threadName"] == "light (1/1)#0":
            t["stringifiedThreadInfo"] = store["stringifiedThreadInfo"]
    routes[dump_path] = (200, dump)
    with serving(routes) as url:
        target = FlinkTarget(url)
        target.start()
        observation = target.observe(samples=3, interval_ms=20)
    disagree = [n for n in observation.notes if n.kind == "flink-disagrees"]
    assert [n.vertex for n in disagree] == ["light"]
    assert re.match(r"Flink's backpressure endpoint says HIGH \((0\.9\d|1\.00)", disagree[0].detail)
    assert disagree[0].detail.endswith("say OK (0.00)")


def test_a_legacy_source_is_sampled_on_its_own_thread() -> None:
    """Recorded: the SourceFunction's thread blocked requesting a buffer, its task thread
    waiting for mail. The source is hard backpressured, not idle, and the slow map is named."""
    with serving(recorded("legacy-slow-map")) as url:
        target = FlinkTarget(url)
        target.start()
        observation = target.observe(samples=4, interval_ms=20)
    [source] = observation.vertex("Source: numbers -> parse").subtasks
    taken = observation.window.samples  # all 4 but where a slow dump overran its slot
    assert taken >= 1 and (source.samples, source.backpressured, source.idle) == (taken, taken, 0)


def test_the_service_names_the_slow_map_behind_a_legacy_source(tmp_path: Path) -> None:
    with serving(recorded("legacy-slow-map")) as url:
        ended = drain(
            monitor_flink(url, samples=4, interval_ms=20, settings=Settings(runs_dir=tmp_path))
        )
    [report] = ended.reports
    assert report.root_causes is not None
    assert (report.root_causes[0].vertex, report.root_causes[0].kind) == (
        "enrich",
        "slow-operator",
    )
