"""``bpmon monitor --flink URL --verify --follow POLICY --steps N`` without a cluster: the flags,
and the steps on recorded responses of a real Flink 2.3 (``fake_flink.py``), with the rescale
itself stood in for (``test_follow_e2e.py`` rescales a real cluster).

What is checked is what the command asks Flink for, step by step: the parallelism the policy
names from each report (bpmon's sized causes, or the autoscaler's whole decision, a scale-down
included), the earlier steps' vertices asked for again, and the JSON of each step."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.collectors.flink.rescale import shape_of, vertex_ids
from bpmon.service import facade

from .fake_flink import job_id, recorded, serving


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pid", "1", "--follow", "autoscaler"), "--follow is for --flink"),
        (("--pid", "1", "--steps", "2"), "--steps is for --flink"),
        (("--flink", "http://127.0.0.1:9", "--follow", "hpa"), "--follow hpa: expected one of"),
        (("--flink", "http://127.0.0.1:9", "--steps", "0"), "--steps 0: from 1 to 5"),
        (("--flink", "http://127.0.0.1:9", "--steps", "6", "--follow", "bpmon"), "--steps 6"),
    ],
)
def test_a_bad_follow_or_steps_is_one_line_before_flink_is_asked(
    bpmon_bin: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """Port 9 answers nothing: an error naming Flink would mean the flags were read too late."""
    done = subprocess.run(
        [str(bpmon_bin), "monitor", *args, "--runs-dir", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"bpmon: error: {message}"), line
    assert not (tmp_path / "r").exists()


Asked = list[dict[str, int]]


def monitor(
    recording: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *flags: str
) -> tuple[Any, Asked, str]:
    """``bpmon monitor --flink`` on ``recording`` with ``flags``: its exit code and output, and
    every parallelism it asked Flink for (the rescale stood in for: the same job goes on)."""
    asked: Asked = []

    def rescale(url: str, job: str | None, wanted: Mapping[str, int], **_: Any) -> str:
        asked.append(dict(wanted))
        return str(job)

    monkeypatch.setattr(facade, "rescale_flink", rescale)
    routes = recorded(recording)
    with serving(routes) as url:
        args = ["monitor", "--flink", url, "--samples", "4", "--interval-ms", "20", *flags]
        result = CliRunner().invoke(app, [*args, "--runs-dir", str(tmp_path)])
    return result, asked, job_id(routes)


def test_each_step_asks_for_bpmons_recommendation_from_the_last_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The recorded slow sink is the same window again after the stand-in rescale: not removed,
    so the second step runs from the second report and asks for its recommendation."""
    result, asked, _ = monitor("slow-sink", monkeypatch, tmp_path, "--steps", "2", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["policy"] == "bpmon"
    first, second = doc["steps"]
    wanted = first["before"]["root_causes"][0]["recommended_parallelism"]
    assert first["before"]["root_causes"][0]["vertex"] == "store: Writer"
    assert first["changes"] == [f"store: Writer.parallelism={wanted}"]
    assert first["backpressure_removed"] is False
    assert second["before"]["run_id"] == first["after"]["run_id"]
    again = second["before"]["root_causes"][0]["recommended_parallelism"]
    assert asked == [{"store: Writer": wanted}, {"store: Writer": again}]


def test_the_autoscaler_policy_applies_its_whole_decision_a_scale_down_included(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """same-names, recorded: the replay serves the same running totals at both readings, so
    the source reads 0 records/s and the target rate is 0 everywhere (as with incomplete I/O
    metrics, FLINK-39925): the autoscaler would scale both ``work`` vertices down after its
    scale-down interval. ``--follow autoscaler`` asks Flink for exactly that decision, the second
    ``work`` by its report name ``work#2``."""
    result, asked, _ = monitor(
        "same-names", monkeypatch, tmp_path, "--follow", "autoscaler", "--json"
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    decision = doc["before"]["autoscaler"]
    changed = {
        v["name"]: v["recommended_parallelism"]
        for v in decision["vertices"]
        if v["recommended_parallelism"] != v["parallelism"]
    }
    assert decision["acts"] is True
    assert changed and all(p < 2 for p in changed.values())  # down from 2
    assert set(changed) == {"work", "work#2"}
    assert asked == [changed]
    assert sorted(doc["changes"]) == sorted(f"{n}.parallelism={p}" for n, p in changed.items())


def test_an_autoscaler_that_would_not_scale_is_the_same_error_as_in_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """slow-sink's DataGen source reports no pendingRecords: without lag growth the target rate
    is what each vertex reads, and the autoscaler scales nothing (bpmon sizes the sink)."""
    result, asked, _ = monitor("slow-sink", monkeypatch, tmp_path, "--follow", "autoscaler")
    assert result.exit_code == 2
    assert "--verify: the autoscaler's decision recommends no parallelism to try" in result.output
    assert asked == []


def test_a_rescale_names_vertices_as_the_report_does() -> None:
    """Two vertices named ``work``: the second is ``work#2`` in the report, and in what the
    rescale reads and asks for."""
    routes = recorded("same-names")
    details = routes[f"/jobs/{job_id(routes)}"][1]
    ids = vertex_ids(details)
    assert list(ids) == ["Source: numbers -> parse", "work", "work#2", "sink: Writer"]
    assert len(set(ids.values())) == 4
    shape = shape_of(details)
    assert shape.vertices["work"] == shape.vertices["work#2"] == (2, 2)
    assert shape.meets({"work#2": 2}) and not shape.meets({"work#2": 3})
