"""``--autoscaler-config FILE``: a malformed file is one line and exit code 2, before any job runs;
a good one is the report's autoscaler configuration."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest


def bpmon(bpmon_bin: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bpmon_bin), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_a_malformed_autoscaler_file_is_one_line_naming_the_key(
    bpmon_bin: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "autoscaler.yaml"
    bad.write_text("job.autoscaler.utilization.target: most\n")
    done = bpmon(
        bpmon_bin, "run", "demo", "--autoscaler-config", str(bad), "--runs-dir", str(tmp_path)
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bpmon: error: {bad}:1: job.autoscaler.utilization.target = 'most': expected a number"
    ]
    assert not list(tmp_path.glob("*-demo-*"))  # nothing ran, nothing was stored


@pytest.mark.slow
def test_the_options_of_the_file_are_the_report_s(bpmon_bin: Path, tmp_path: Path) -> None:
    good = tmp_path / "autoscaler.yaml"
    good.write_text(
        "job.autoscaler.utilization.target: 0.5\njob.autoscaler.catch-up.duration: 5m\n"
    )
    done = bpmon(
        bpmon_bin,
        "run",
        "demo",
        "--json",
        "--autoscaler-config",
        str(good),
        "--runs-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)["autoscaler"]["config"]
    assert config["job.autoscaler.utilization.target"] == 0.5
    assert config["job.autoscaler.catch-up.duration"] == 300.0
