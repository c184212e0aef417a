"""``--follow POLICY`` and ``--steps N``: whose recommendation a re-run applies, and how many
times. A bad flag is one line and exit code 2 before any job runs; the steps run real scenarios
on bpmon's runtime and are checked against what each report recommended and what the re-run
measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest


def bpmon(bpmon_bin: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bpmon_bin), *args, "--runs-dir", "r"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=cwd,
    )


WHOLE_TRIES = 3
"""Whole what-ifs a step test runs while a re-run's runtime was saturated each of the times
the command tried it (the command judges no such step: it says so and follows no further)."""


def _saturated(report: dict[str, Any]) -> bool:
    return any(f["kind"] == "runtime-saturated" for f in report["findings"])


def _told(step: dict[str, Any]) -> dict[str, object]:
    """What a step's failure should show: its changes, verdict, and the re-run's diagnosis."""
    after = step["after"]
    return {
        "changes": step["changes"],
        "removed": step["backpressure_removed"],
        "levels": {v["name"]: (v["level"], v["ratio"]) for v in after["vertices"]},
        "causes": after["root_causes"],
        "findings": after["findings"],
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("whatif", "demo"), "bpmon whatif: pass --set VERTEX.KEY=VALUE or --follow POLICY"),
        (
            ("whatif", "demo", "--set", "enrich.parallelism=3", "--follow", "bpmon"),
            "bpmon whatif: pass --set VERTEX.KEY=VALUE or --follow POLICY",
        ),
        (("whatif", "demo", "--follow", "hpa"), "--follow hpa: expected one of bpmon, autoscaler"),
        (("run", "demo", "--follow", "hpa"), "--follow hpa: expected one of bpmon, autoscaler"),
        (("run", "demo", "--steps", "6"), "--steps 6: from 1 to 5"),
        (("whatif", "demo", "--follow", "bpmon", "--steps", "0"), "--steps 0: from 1 to 5"),
    ],
)
def test_a_bad_follow_or_steps_is_one_line_before_anything_runs(
    bpmon_bin: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = bpmon(bpmon_bin, tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"bpmon: error: {message}"]
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


@pytest.mark.slow
def test_following_the_autoscaler_on_a_hot_key_scales_it_without_effect(
    bpmon_bin: Path, tmp_path: Path
) -> None:
    """hot-key: 80% of the records share one key, so subtask 0 of aggregate is offered ~3,400
    records/s for ~2,000 of capacity whatever the parallelism. The autoscaler sees aggregate at
    full load and scales it up; the report must say that will not help, and the re-run with the
    autoscaler's parallelism applied must still be backpressured."""
    done = bpmon(bpmon_bin, tmp_path, "whatif", "hot-key", "--follow", "autoscaler", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    decided = {
        v["name"]: v["recommended_parallelism"]
        for v in doc["before"]["autoscaler"]["vertices"]
        if v["recommended_parallelism"] != v["parallelism"]
    }
    assert decided["aggregate"] > 4
    applied = sorted(f"{name}.parallelism={p}" for name, p in decided.items())
    assert sorted(doc["changes"]) == applied
    verdicts = {v["vertex"]: v["verdict"] for v in doc["before"]["autoscaler"]["verdicts"]}
    assert verdicts.get("aggregate") == "scales-ineffectively", verdicts
    assert doc["backpressure_removed"] is False
    after = {v["name"]: v for v in doc["after"]["vertices"]}
    assert after["aggregate"]["parallelism"] == decided["aggregate"]
    assert after["payments"]["level"] == "HIGH"  # the hot subtask still holds the source back


@pytest.mark.slow
def test_steps_go_on_from_each_re_run_until_the_backpressure_is_gone(
    bpmon_bin: Path, tmp_path: Path
) -> None:
    """demo: enrich takes ~500 records/s per subtask of the 3,000 offered, so 4 subtasks (the
    first step, given) are too few; the second step follows bpmon's recommendation from the
    re-run at 4 and must remove the backpressure, and no third step runs."""
    for _ in range(WHOLE_TRIES):
        done = bpmon(
            bpmon_bin, tmp_path,
            "whatif", "demo", "--set", "enrich.parallelism=4", "--steps", "3", "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["policy"] == "bpmon"
        judged = [step for step in doc["steps"] if not _saturated(step["after"])]
        if len(judged) == len(doc["steps"]):
            break
        # a re-run saturated every time it was tried is not judged, and no step follows it
        assert not doc["steps"][-1]["backpressure_removed"]
        assert len(judged) == len(doc["steps"]) - 1
    else:
        pytest.fail(f"the runtime was saturated in {WHOLE_TRIES} whole what-ifs", pytrace=False)
    assert len(doc["steps"]) == 2, (done.stderr, [_told(step) for step in doc["steps"]])
    first, second = doc["steps"]  # the second removed it: no third
    assert first["changes"] == ["enrich.parallelism=4"]
    assert first["backpressure_removed"] is False
    cause = first["after"]["root_causes"][0]
    assert cause["vertex"] == "enrich"
    assert second["changes"] == [f"enrich.parallelism={cause['recommended_parallelism']}"]
    assert cause["recommended_parallelism"] in (6, 7, 8)  # 3,000 / (~500 x 0.9), from 4's figures
    assert second["before"]["run_id"] == first["after"]["run_id"]
    assert second["backpressure_removed"] is True
