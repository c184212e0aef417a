"""The service facade: finding a scenario, the run loop's events, re-reading a run, monitor checks.

Everything runs for real: a tiny scenario on the real runtime (a fraction of a second per burst),
the real runs store in a temporary folder, and py-spy for the one monitor call that gets as far
as the process. Argument checks are made against a PID that has exited, so a check that came
after sampling would show up as the wrong error.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeGuard

import pytest

from bpmon.model.errors import ConfigError, ScenarioError, TargetNotFoundError
from bpmon.model.events import (
    JobEnded,
    JobFailed,
    JobStarted,
    LiveSnapshot,
    ReportReady,
    WatchEvent,
)
from bpmon.model.report_json import report_to_json
from bpmon.rules.config import RulesConfig
from bpmon.scenario import example_names, example_path, parse_scenario
from bpmon.service.facade import (
    DEFAULT_RUNS_DIR,
    Settings,
    drain,
    load_report,
    monitor_process,
    run_bursts,
    run_scenario,
    stored_runs,
)
from bpmon.service.scenarios import resolve_scenario, shipped_examples
from tests.collectors.pipelines import running_pipeline
from tests.runtime.jobs import task_threads
from tests.tiny import TINY

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def gone_pid() -> int:
    """The PID of a process that has exited."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    return gone.pid


def settings(runs_dir: Path, seed: int = 1) -> Settings:
    """Settings with a fixed clock and seed, so run ids are known in advance."""
    return Settings(runs_dir=runs_dir, now=lambda: NOW, rng=random.Random(seed))


# -- resolve_scenario ----------------------------------------------------------------------------


def test_a_scenario_file_is_found_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    assert resolve_scenario(str(path)).name == "tiny"


def test_a_file_in_the_current_folder_wins_over_an_example_of_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "demo").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    assert resolve_scenario("demo").name == "tiny"


@pytest.mark.parametrize("name", example_names())
def test_a_shipped_example_is_found_by_its_name(name: str) -> None:
    declared = tomllib.loads(example_path(name).read_text())["name"]
    scenario = resolve_scenario(name)
    assert scenario.name == declared
    assert scenario.path is not None and Path(scenario.path).stem == name


@pytest.mark.parametrize("ref", ["missing.toml", "sub/missing"])
def test_a_missing_file_is_a_scenario_error_naming_it(ref: str, tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="missing"):
        resolve_scenario(str(tmp_path / ref))


def test_an_unknown_name_is_a_config_error_listing_the_examples() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_scenario("no-such-example")
    message = str(info.value)
    assert "no-such-example" in message
    assert "\n" not in message
    for name in ["demo", "hot-key", "slow-sink", "healthy"]:
        assert name in message


def test_shipped_examples_include_the_demo() -> None:
    assert "demo" in shipped_examples()
    assert list(shipped_examples()) == sorted(shipped_examples())


# -- Settings ------------------------------------------------------------------------------------


def test_settings_default_to_a_local_runs_folder_and_the_shipped_rules() -> None:
    settings = Settings()
    assert settings.runs_dir == DEFAULT_RUNS_DIR == Path("bpmon-runs")
    assert settings.store().root == Path("bpmon-runs")
    assert settings.rules() == RulesConfig(origin=settings.rules().origin)


def test_a_missing_rules_file_is_a_config_error_before_any_job_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml"):
        run_scenario(parse_scenario(TINY), Settings(tmp_path, rules_path=tmp_path / "nope.toml"))
    assert task_threads() == []


# -- the run loop --------------------------------------------------------------------------------


def test_a_run_id_is_time_job_and_random_part(tmp_path: Path) -> None:
    first = settings(tmp_path, seed=5).new_run_id("tiny")
    assert first.startswith("20260102T030405Z-tiny-")
    assert len(first) == len("20260102T030405Z-tiny-") + 4
    assert settings(tmp_path, seed=5).new_run_id("tiny") == first
    assert settings(tmp_path, seed=6).new_run_id("tiny") != first


def test_a_watch_starts_samples_saves_and_stops_without_leaks(tmp_path: Path) -> None:
    events = list(run_scenario(parse_scenario(TINY), settings(tmp_path), bursts=2, duration_s=0.5))
    started, ended = events[0], events[-1]
    assert isinstance(started, JobStarted) and isinstance(ended, JobEnded)
    assert not isinstance(ended, JobFailed)
    assert (started.job, started.source, started.bursts) == ("tiny", "runtime", 2)
    assert ended.leaks == () and task_threads() == []
    kinds = [type(e).__name__ for e in events if not isinstance(e, LiveSnapshot)]
    assert kinds == ["JobStarted", *["BurstSampled", "ReportReady"] * 2, "JobEnded"]
    ready = [e for e in events if isinstance(e, ReportReady)]
    assert [e.burst for e in ready] == [0, 1]
    assert list(ended.reports) == [e.report for e in ready]
    first = ended.reports[0]
    assert (first.job, first.source, first.window.samples) == ("tiny", "runtime", 10)
    assert {r.run_id for r in ended.reports} == {started.run_id}
    folder = tmp_path / started.run_id
    assert list(ended.paths) == [folder / "report.json", folder / "report-1.json"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "bursts.jsonl",
        "report-1.json",
        "report.json",
    ]
    lines = (folder / "bursts.jsonl").read_text().splitlines()
    assert [json.loads(line)["burst"] for line in lines] == [0, 1]


def test_the_job_runs_its_duration_after_the_last_burst(tmp_path: Path) -> None:
    events = list(run_scenario(parse_scenario(TINY), settings(tmp_path), duration_s=1.0))
    after = [e for e in events[events.index(_first(events, ReportReady)) :] if _live(e)]
    assert after and after[-1].phase == "running"
    assert after[-1].elapsed_s >= 0.75  # the last snapshot falls in the last quarter second


def test_live_snapshots_are_model_values_with_levels_from_the_time_accounting(
    tmp_path: Path,
) -> None:
    events = list(run_scenario(parse_scenario(TINY), settings(tmp_path), duration_s=1.0))
    snapshots = [e for e in events if isinstance(e, LiveSnapshot)]
    assert snapshots, "no live snapshot while the job ran"
    last = snapshots[-1]
    assert [v.name for v in last.vertices] == ["src", "out"]
    assert [len(v.subtasks) for v in last.vertices] == [2, 1]
    src = last.vertices[0]
    # a vertex is totalled from its subtasks: rates summed, ratios at their worst
    rates = [s.metrics.records_out_per_s or 0.0 for s in src.subtasks]
    assert src.metrics.records_out_per_s == pytest.approx(sum(rates))
    assert src.metrics.records_out_per_s > 0
    for v in last.vertices:
        for sub in v.subtasks:
            assert sub.ratio == sub.metrics.backpressured_time_ratio  # no samples: time view
            assert sub.level == "OK"  # 200 records/s against a sink that takes 20,000
    progress = [e.sampling.done for e in snapshots if e.sampling is not None]
    assert progress == sorted(progress) and all(0 <= d <= 10 for d in progress)


def test_closing_the_stream_mid_burst_stops_the_job_and_the_sampler(tmp_path: Path) -> None:
    slow = parse_scenario(TINY.replace("samples = 10", "samples = 200"))
    events = run_scenario(slow, settings(tmp_path))
    for event in events:
        if isinstance(event, LiveSnapshot) and event.sampling is not None:
            break
    events.close()  # type: ignore[attr-defined]
    assert task_threads() == []
    assert not [t for t in threading.enumerate() if t.name == "bpmon-sampler"]
    assert not list(tmp_path.glob("*/report.json"))  # nothing half-done was saved


def test_a_stop_event_ends_the_watch_with_what_it_has(tmp_path: Path) -> None:
    stop = threading.Event()
    events = run_scenario(parse_scenario(TINY), settings(tmp_path), bursts=None, stop=stop)
    reports = 0
    for event in events:
        if isinstance(event, ReportReady):
            reports += 1
            stop.set()
        last = event
    assert isinstance(last, JobEnded) and reports >= 1
    assert last.bursts == reports and last.leaks == ()
    assert last.reports == ()  # a watch until stopped keeps no report: they went to disk
    assert len(list(tmp_path.glob("*/report*.json"))) == reports
    assert task_threads() == []


def test_a_saved_report_is_read_back_by_run_id_folder_or_file(tmp_path: Path) -> None:
    ended = drain(run_scenario(parse_scenario(TINY), settings(tmp_path), duration_s=0.2))
    saved = ended.paths[0]
    store_settings = Settings(runs_dir=tmp_path)
    for ref in (ended.run_id, str(saved.parent), str(saved)):
        loaded = load_report(ref, store_settings)
        assert report_to_json(loaded) + "\n" == saved.read_text()
    assert json.loads(saved.read_text())["run_id"] == ended.run_id
    assert [b for b, _ in run_bursts(ended.run_id, store_settings)] == [0]
    assert [r.run_id for r in stored_runs(store_settings)] == [ended.run_id]


def test_an_unknown_run_is_target_not_found(tmp_path: Path) -> None:
    with pytest.raises(TargetNotFoundError, match="nosuchrun"):
        load_report("nosuchrun", Settings(runs_dir=tmp_path))


def _first(events: list[WatchEvent], kind: type[WatchEvent]) -> WatchEvent:
    return next(e for e in events if isinstance(e, kind))


def _live(event: WatchEvent) -> TypeGuard[LiveSnapshot]:
    return isinstance(event, LiveSnapshot)


# -- monitor_process -----------------------------------------------------------------------------


@pytest.mark.parametrize(("samples", "interval_ms"), [(0, 50.0), (-3, 50.0), (10, 0.0), (10, -1.0)])
def test_monitor_rejects_no_samples_or_no_interval_before_sampling(
    samples: int, interval_ms: float, gone_pid: int, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"--samples .* --interval-ms") as info:
        monitor_process(
            gone_pid,
            samples=samples,
            interval_ms=interval_ms,
            settings=Settings(runs_dir=tmp_path / "runs"),
        )
    assert "\n" not in str(info.value)
    assert not (tmp_path / "runs").exists()


def test_monitor_rejects_an_unknown_profile_naming_it(gone_pid: int, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no-such-profile") as info:
        monitor_process(
            gone_pid,
            collector_profile="no-such-profile",
            settings=Settings(runs_dir=tmp_path / "runs"),
        )
    assert "python-queue" in str(info.value)  # the known profiles are listed
    assert not (tmp_path / "runs").exists()


def test_monitor_rejects_a_missing_topology_file_naming_it(gone_pid: int, tmp_path: Path) -> None:
    missing = tmp_path / "etl.toml"
    with pytest.raises(ScenarioError, match=r"etl\.toml"):
        monitor_process(gone_pid, topology=str(missing), settings=Settings(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


def test_monitor_of_a_process_that_exited_is_target_not_found(
    gone_pid: int, tmp_path: Path
) -> None:
    with pytest.raises(TargetNotFoundError, match=f"PID {gone_pid}"):
        drain(monitor_process(gone_pid, samples=3, interval_ms=10, settings=Settings(tmp_path)))
    assert list(tmp_path.iterdir()) == []


def test_a_name_too_long_for_a_path_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="File name too long"):
        resolve_scenario("a" * 300)


@pytest.mark.slow
def test_a_watched_process_that_exits_ends_the_watch_as_ended(tmp_path: Path) -> None:
    with running_pipeline() as process:
        events = monitor_process(
            process.pid,
            samples=5,
            interval_ms=20,
            bursts=None,
            every_s=0.5,
            settings=settings(tmp_path),
            live=False,
        )
        ended = None
        for event in events:
            if isinstance(event, ReportReady):
                process.kill()  # the job goes away on its own, between two bursts
                process.wait(timeout=30)
            if isinstance(event, JobEnded):
                ended = event
    assert type(ended) is JobEnded  # ended, not failed
    assert ended.reason == f"process {process.pid} exited" and ended.bursts >= 1
