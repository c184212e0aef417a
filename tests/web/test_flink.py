"""Flink's backpressure endpoint, mirrored: the same keys, types and meaning as Flink 1.20's.

The Flink responses compared with are in ``fixtures/`` (written from Flink's documented format;
``fixtures/README.md`` says from where). bpmon's answers come from real reports: a job of the
real runtime whose source is held back by a slow sink, served by a real uvicorn.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bpmon.model.values import Metrics, Report, SubtaskStatus, VertexStatus, Window
from bpmon.scenario import parse_scenario
from bpmon.service import facade
from bpmon.service.watching import Watches
from bpmon.web.flink import backpressure_info

from .servers import ServeFactory

FIXTURES = Path(__file__).parent / "fixtures"
FLINK = json.loads((FIXTURES / "flink-1.20-backpressure.json").read_text())
FLINK_DEPRECATED = json.loads((FIXTURES / "flink-1.20-backpressure-deprecated.json").read_text())

JAM = """
name = "jam"
duration_s = 5

[monitor]
warmup_s = 0.5
samples = 10
interval_ms = 10

[[operators]]
name = "src"
kind = "source"
parallelism = 2
rate = 4000

[[operators]]
name = "out"
kind = "sink"
cost_us = 2000
inputs = [{ from = "src", partitioner = "rebalance" }]
"""
"""The sink takes 500 records/s, the sources offer 8000: the sources are held back."""


def flink_level(ratio: float) -> str:
    """Flink 1.20's JobVertexBackPressureHandler: ok <= 0.10 < low <= 0.50 < high (written out
    here again, so a change of bpmon's thresholds cannot pass unnoticed)."""
    return "ok" if ratio <= 0.10 else "low" if ratio <= 0.50 else "high"


def assert_same_shape(ours: Any, flinks: Any, where: str = "$") -> None:
    """Key by key: the same keys in every object, the same JSON type in every value."""
    if isinstance(flinks, dict):
        assert isinstance(ours, dict), where
        assert set(ours) == set(flinks), f"{where}: {sorted(ours)} != {sorted(flinks)}"
        for key, value in flinks.items():
            assert_same_shape(ours[key], value, f"{where}.{key}")
    elif isinstance(flinks, list):
        assert isinstance(ours, list) and ours, where
        for item in ours:
            assert_same_shape(item, flinks[0], f"{where}[]")
    else:
        assert type(ours) is type(flinks), f"{where}: {ours!r} is not a {type(flinks).__name__}"


def assert_flink_semantics(info: dict[str, Any]) -> None:
    """Levels are Flink's strings of the ratios; the vertex takes its highest subtask's."""
    subtasks = info["subtasks"]
    assert [s["subtask"] for s in subtasks] == sorted(s["subtask"] for s in subtasks)
    for sub in subtasks:
        assert sub["backpressureLevel"] == sub["backpressure-level"] == flink_level(sub["ratio"])
        for key in ("ratio", "idleRatio", "busyRatio"):
            assert 0.0 <= sub[key] <= 1.0
    worst = max(s["ratio"] for s in subtasks)
    assert info["backpressureLevel"] == info["backpressure-level"] == flink_level(worst)
    assert info["status"] == "ok"


@pytest.fixture(scope="module")
def jam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs directory with one run of the jammed job."""
    runs = tmp_path_factory.mktemp("jam") / "runs"
    settings = facade.Settings(runs_dir=runs)
    facade.drain(facade.run_scenario(parse_scenario(JAM), settings, duration_s=0.1))
    return runs


def test_the_fixture_itself_follows_flinks_rules() -> None:
    assert_flink_semantics(FLINK)
    assert FLINK_DEPRECATED == {"status": "deprecated"}


def test_a_real_report_is_answered_with_flinks_keys_types_and_levels(
    jam: Path, serve: ServeFactory
) -> None:
    client = serve(Watches(facade.Settings(runs_dir=jam))).client
    response = client.get("/jobs/jam/vertices/src/backpressure")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    info = response.json()
    assert_same_shape(info, FLINK)
    assert_flink_semantics(info)
    assert info["backpressureLevel"] == "high"  # the sources wait on the slow sink
    run_id = next(p.name for p in jam.iterdir() if (p / "report.json").is_file())
    report = facade.load_report(run_id, facade.Settings(runs_dir=jam))
    assert info["end-timestamp"] == int(report.window.end.timestamp() * 1000)
    assert [s["subtask"] for s in info["subtasks"]] == [0, 1]


def test_every_vertex_of_a_report_keeps_flinks_meaning(jam: Path, serve: ServeFactory) -> None:
    client = serve(Watches(facade.Settings(runs_dir=jam))).client
    for vertex in ("src", "out"):
        info = client.get(f"/jobs/jam/vertices/{vertex}/backpressure").json()
        assert_same_shape(info, FLINK)
        assert_flink_semantics(info)


def test_a_run_id_names_a_job_too(jam: Path, serve: ServeFactory) -> None:
    client = serve(Watches(facade.Settings(runs_dir=jam))).client
    run_id = next(p.name for p in jam.iterdir() if (p / "report.json").is_file())
    by_run = client.get(f"/jobs/{run_id}/vertices/out/backpressure")
    assert by_run.status_code == 200
    assert by_run.json() == client.get("/jobs/jam/vertices/out/backpressure").json()


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("/jobs/nope/vertices/src/backpressure", "'nope'"),
        ("/jobs/jam/vertices/nope/backpressure", "src, out"),
        ("/jobs/..%2F..%2Fetc/vertices/src/backpressure", "Not Found"),
    ],
)
def test_unknown_jobs_and_vertices_are_404_in_flinks_error_shape(
    jam: Path, serve: ServeFactory, path: str, names: str
) -> None:
    client = serve(Watches(facade.Settings(runs_dir=jam))).client
    url = client.build_request("GET", "/").url.copy_with(raw_path=path.encode())
    response = client.get(url)
    assert response.status_code == 404
    body = response.json()
    message = body["errors"][0] if "errors" in body else body["detail"]
    assert names in message


T = datetime(2026, 11, 22, 10, 15, 2, tzinfo=UTC)


def status(index: int, ratio: float | None, level: str | None, **metrics: float) -> SubtaskStatus:
    return SubtaskStatus(index, level, ratio, Metrics(**metrics))  # type: ignore[arg-type]


def report_of(*subtasks: SubtaskStatus, level: str | None = None) -> Report:
    vertex = VertexStatus("v", len(subtasks), level, None, subtasks=subtasks)  # type: ignore[arg-type]
    window = Window(T, T, samples=10, interval_ms=10.0)
    return Report("r", "j", "runtime", window, (vertex,))


def test_subtasks_are_sorted_and_missing_figures_are_zero_as_flink_sends_them() -> None:
    report = report_of(
        status(1, 0.3, "LOW", idle_ratio=0.2),
        status(0, 0.95, "HIGH", busy_ratio=0.05, idle_ratio=float("nan")),
        level="HIGH",
    )
    info = backpressure_info(report, report.vertices[0])
    assert_same_shape(info, FLINK)
    assert info["end-timestamp"] == int(T.timestamp()) * 1000
    first, second = info["subtasks"]
    assert (first["subtask"], first["backpressureLevel"], first["ratio"]) == (0, "high", 0.95)
    assert (first["idleRatio"], first["busyRatio"]) == (0.0, 0.05)  # NaN and None: 0.0
    assert (second["subtask"], second["busyRatio"], second["idleRatio"]) == (1, 0.0, 0.2)
    assert info["backpressureLevel"] == "high"


def test_the_ratio_is_backpressured_time_as_in_flink_and_the_level_is_flinks_of_it() -> None:
    report = report_of(
        status(0, 0.05, "OK", backpressured_time_ratio=0.6),  # samples say OK, time says high
        status(1, 0.9, "HIGH", backpressured_time_ratio=0.10),  # the boundary is ok
        status(2, 0.5, "LOW"),  # no time accounting (py-spy): the sampled share
        level="HIGH",
    )
    info = backpressure_info(report, report.vertices[0])
    assert_flink_semantics(info)
    levels = [(s["ratio"], s["backpressureLevel"]) for s in info["subtasks"]]
    assert levels == [(0.6, "high"), (0.10, "ok"), (0.5, "low")]
    assert info["backpressureLevel"] == "high"


def test_a_vertex_without_any_figure_is_deprecated_as_flink_says_before_its_first_fetch() -> None:
    report = report_of(status(0, None, None), status(1, None, None))
    info = backpressure_info(report, report.vertices[0])
    assert info == FLINK_DEPRECATED
