"""The service facade: finding a scenario, a run session's life, re-reading a run, monitor checks.

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
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bpmon.errors import ConfigError, ScenarioError, TargetNotFoundError
from bpmon.report_json import report_to_json
from bpmon.rules.config import RulesConfig
from bpmon.scenario import example_names, example_path, parse_scenario
from bpmon.service import (
    DEFAULT_RUNS_DIR,
    RunSession,
    Settings,
    load_report,
    monitor_process,
    resolve_scenario,
    shipped_examples,
)

TINY = """
name = "tiny"
duration_s = 5

[monitor]
warmup_s = 0
samples = 10
interval_ms = 10

[[operators]]
name = "src"
kind = "source"
parallelism = 2
rate = 200

[[operators]]
name = "out"
kind = "sink"
cost_us = 50
inputs = [{ from = "src", partitioner = "rebalance" }]
"""
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def gone_pid() -> int:
    """The PID of a process that has exited."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    return gone.pid


def session(runs_dir: Path, seed: int = 1) -> RunSession:
    """A session of the tiny scenario with a fixed clock and seed."""
    return RunSession(
        parse_scenario(TINY),
        Settings(runs_dir=runs_dir),
        clock_now=lambda: NOW,
        rng=random.Random(seed),
    )


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
        RunSession(parse_scenario(TINY), Settings(tmp_path, rules_path=tmp_path / "nope.toml"))


# -- RunSession ----------------------------------------------------------------------------------


def test_a_run_id_is_time_job_and_random_part(tmp_path: Path) -> None:
    first = session(tmp_path, seed=5)
    assert first.run_id.startswith("20260102T030405Z-tiny-")
    assert len(first.run_id) == len("20260102T030405Z-tiny-") + 4
    assert session(tmp_path, seed=5).run_id == first.run_id
    assert session(tmp_path, seed=6).run_id != first.run_id
    assert first.stop().leaks == ()  # never started: nothing to leak, nothing hangs


def test_a_session_starts_samples_saves_and_stops_without_leaks(tmp_path: Path) -> None:
    run = session(tmp_path)
    run.start()
    try:
        live = run.live_metrics()
        assert list(live) == ["src", "out"]
        assert [len(group) for group in live.values()] == [2, 1]
        progress: list[tuple[int, int]] = []
        first = run.burst(lambda done, total: progress.append((done, total)))
        second = run.burst()
    finally:
        result = run.stop()
    assert result.leaks == () and result.state == "cancelled", result
    assert not [t.name for t in run.job.all_tasks() if t.thread.is_alive()]
    assert progress[-1] == (10, 10)
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)
    assert (first.job, first.source, first.window.samples) == ("tiny", "runtime", 10)
    assert first.run_id == second.run_id == run.run_id
    folder = tmp_path / run.run_id
    assert run.outcome.saved == [folder / "report.json", folder / "report-1.json"]
    assert run.outcome.reports == [first, second]
    assert run.outcome.result is result
    assert sorted(p.name for p in folder.iterdir()) == ["report-1.json", "report.json"]


def test_stop_is_idempotent(tmp_path: Path) -> None:
    run = session(tmp_path)
    run.start()
    run.wait(0.05)
    first = run.stop()
    assert run.stop() is first
    assert first.leaks == ()


def test_a_saved_report_is_read_back_by_run_id_folder_or_file(tmp_path: Path) -> None:
    run = session(tmp_path)
    run.start()
    try:
        run.burst()
    finally:
        run.stop()
    saved = run.outcome.saved[0]
    settings = Settings(runs_dir=tmp_path)
    for ref in (run.run_id, str(saved.parent), str(saved)):
        loaded = load_report(ref, settings)
        assert report_to_json(loaded) + "\n" == saved.read_text()
    assert json.loads(saved.read_text())["run_id"] == run.run_id


def test_an_unknown_run_is_target_not_found(tmp_path: Path) -> None:
    with pytest.raises(TargetNotFoundError, match="nosuchrun"):
        load_report("nosuchrun", Settings(runs_dir=tmp_path))


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
            gone_pid, profile="no-such-profile", settings=Settings(runs_dir=tmp_path / "runs")
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
        monitor_process(gone_pid, samples=3, interval_ms=10, settings=Settings(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_name_too_long_for_a_path_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="File name too long"):
        resolve_scenario("a" * 300)
