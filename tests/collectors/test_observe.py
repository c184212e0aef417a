"""From a burst to an Observation: grouping threads into vertices, with and without a topology."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bpmon.collectors.observe import observation_from_burst
from bpmon.collectors.profile import load_profile
from bpmon.collectors.sampler import StackBurst, ThreadCounts
from bpmon.model.errors import ConfigError
from bpmon.model.values import Edge, Metrics
from bpmon.scenario import parse_topology

ETL = (Path(__file__).parent / "etl-topology.toml").read_text()

START = datetime(2026, 11, 22, 10, 15, 2, tzinfo=UTC)


def burst(*threads: ThreadCounts) -> StackBurst:
    return StackBurst(
        start=START,
        end=START + timedelta(seconds=5),
        samples=100,
        interval_ms=50.0,
        jitter_ms_p99=0.8,
        threads=threads,
    )


PIPELINE = burst(
    ThreadCounts("MainThread", 1, idle=100),
    ThreadCounts("ingest-0", 2, backpressured=97, busy=3),
    ThreadCounts("transform-10", 3, backpressured=90, busy=10),
    ThreadCounts("transform-2", 4, backpressured=95, busy=5),
    ThreadCounts("upload-0", 5, busy=100),
)


def test_topology_threads_become_subtasks_in_natural_name_order() -> None:
    obs = observation_from_burst(
        PIPELINE, parse_topology(ETL), load_profile("python-queue"), "etl", "pyspy"
    )
    assert [v.name for v in obs.vertices] == ["ingest", "transform", "upload"]
    transform = obs.vertex("transform")
    assert transform.parallelism == 2
    assert [(s.index, s.thread) for s in transform.subtasks] == [
        (0, "transform-2"),
        (1, "transform-10"),
    ]
    assert (transform.subtasks[1].backpressured, transform.subtasks[1].busy) == (90, 10)
    assert transform.subtasks[1].samples == 100
    assert transform.inputs == (Edge("ingest", "forward", "pipelined"),)
    assert obs.vertex("upload").kind == "sink"
    assert (obs.job, obs.source) == ("etl", "pyspy")
    assert (obs.window.samples, obs.window.interval_ms, obs.window.jitter_ms_p99) == (100, 50, 0.8)
    assert obs.window.start == START


def test_threads_outside_the_topology_are_left_out() -> None:
    obs = observation_from_burst(
        PIPELINE, parse_topology(ETL), load_profile("python-queue"), "etl", "pyspy"
    )
    threads = {s.thread for v in obs.vertices for s in v.subtasks}
    assert "MainThread" not in threads


def test_default_thread_pattern_is_the_runtime_naming() -> None:
    topology = parse_topology(
        'name = "j"\n[[operators]]\nname = "src"\n'
        '[[operators]]\nname = "map"\ninputs = [{ from = "src" }]\n'
    )
    runtime_burst = burst(
        ThreadCounts("map (2/2)", 1, idle=100),
        ThreadCounts("map (1/2)", 2, busy=100),
        ThreadCounts("src (1/1)", 3, backpressured=100),
    )
    obs = observation_from_burst(
        runtime_burst, topology, load_profile("bpmon-runtime"), "j", "runtime"
    )
    assert [s.thread for s in obs.vertex("map").subtasks] == ["map (1/2)", "map (2/2)"]
    assert obs.vertex("src").parallelism == 1


def test_an_operator_matching_no_thread_is_an_error_naming_it() -> None:
    topology = parse_topology(ETL.replace(r"'^upload-\d+$'", r"'^uploader-\d+$'"))
    with pytest.raises(ConfigError) as info:
        observation_from_burst(PIPELINE, topology, load_profile("python-queue"), "etl", "pyspy")
    message = str(info.value)
    assert "'upload'" in message
    assert "^uploader-" in message
    assert "'transform-2'" in message and "'MainThread'" in message
    assert "\n" not in message


def test_without_topology_the_profile_groups_threads() -> None:
    obs = observation_from_burst(PIPELINE, None, load_profile("python-queue"), "etl", "pyspy")
    by_name = {v.name: v for v in obs.vertices}
    assert set(by_name) == {"MainThread", "ingest", "transform", "upload"}
    assert by_name["transform"].parallelism == 2
    assert [s.thread for s in by_name["transform"].subtasks] == ["transform-2", "transform-10"]
    assert by_name["MainThread"].parallelism == 1
    assert all(v.inputs == () for v in obs.vertices)


def test_metrics_fill_their_subtasks_and_the_rest_stay_none() -> None:
    metrics = {
        "transform": {
            1: Metrics(out_pool_usage=1.0, records_in_per_s=250.0, soft_backpressured_ratio=0.5)
        }
    }
    obs = observation_from_burst(
        PIPELINE,
        parse_topology(ETL),
        load_profile("python-queue"),
        "etl",
        "runtime",
        metrics=metrics,
    )
    second = obs.vertex("transform").subtasks[1]
    assert (second.metrics.out_pool_usage, second.metrics.records_in_per_s) == (1.0, 250.0)
    assert second.metrics.soft_backpressured_ratio == 0.5
    first = obs.vertex("transform").subtasks[0]
    assert first.metrics.out_pool_usage is None and first.metrics.busy_ratio is None


def test_a_thread_is_on_the_data_path_by_topology_by_name_or_by_its_samples() -> None:
    keeper = ThreadCounts("MainThread", 1, busy=100, data_path=False)
    stage = ThreadCounts("upload-0", 5, busy=100, data_path=False)  # never caught in its get
    loose = ThreadCounts("Thread-3 (work)", 6, busy=60, idle=40, data_path=True)
    profile = load_profile("python-queue")
    grouped = observation_from_burst(burst(keeper, stage, loose), None, profile, "p", "pyspy")
    on_path = {v.name: v.subtasks[0].data_path for v in grouped.vertices}
    assert on_path == {"MainThread": False, "upload": True, "Thread-3 (work)": True}
    listed = (
        "name = 'one'\n[[operators]]\nname = 'main'\nthreads = '^MainThread$'\n"
        "[[operators]]\nname = 'up'\nthreads = '^upload-0$'\ninputs = [{ from = 'main' }]\n"
    )
    topo = observation_from_burst(
        burst(keeper, stage), parse_topology(listed), profile, "p", "pyspy"
    )
    assert all(s.data_path for v in topo.vertices for s in v.subtasks)
