"""``bpmon monitor --flink`` on addresses and jobs that cannot be watched: one line, the fix, an
exit code, never a traceback. The real command, against nothing listening or a real HTTP server
answering as Flink would (``fake_flink.py``); a cancelled job on the real cluster is in
``test_e2e.py``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .cluster import free_port
from .fake_flink import Routes, Script, serving

JOB = "5d7e0c0bd2e3b4ae3e1c6a0f1c2b7a90"
VERTEX = "cbc357ccb763df2852fee8c4fc7d55f2"
CONFIG = (200, {"flink-version": "2.3.0"})


def overview(*jobs: tuple[str, str, str]) -> tuple[int, Any]:
    rows = [{"jid": j, "name": n, "state": s, "start-time": 1} for j, n, s in jobs]
    return 200, {"jobs": rows}


def run(bpmon_bin: Path, tmp_path: Path, *flags: str) -> tuple[int, str]:
    """Exit code and stderr of ``bpmon monitor FLAGS``."""
    done = subprocess.run(
        [str(bpmon_bin), "monitor", *flags, "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stderr


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("bpmon: error: ")
    return lines[0]


def test_nothing_listening(bpmon_bin: Path, tmp_path: Path) -> None:
    code, err = run(bpmon_bin, tmp_path, "--flink", f"http://127.0.0.1:{free_port()}")
    line = one_line(err)
    assert code == 5
    assert "cannot reach Flink" in line and "connection refused" in line
    assert "rest.port" in line


def test_an_address_that_is_not_flink(bpmon_bin: Path, tmp_path: Path) -> None:
    with serving({}) as url:
        code, err = run(bpmon_bin, tmp_path, "--flink", url)
    assert code == 5
    assert "is not a Flink REST endpoint" in one_line(err)


def test_not_an_http_address(bpmon_bin: Path, tmp_path: Path) -> None:
    code, err = run(bpmon_bin, tmp_path, "--flink", "ftp://example.org")
    assert code == 2
    assert "http://localhost:8081" in one_line(err)


def test_pid_and_flink_together(bpmon_bin: Path, tmp_path: Path) -> None:
    code, err = run(bpmon_bin, tmp_path, "--pid", "1", "--flink", "http://127.0.0.1:1")
    assert code == 2
    assert "either --pid PID or --flink URL" in one_line(err)


@pytest.mark.parametrize(
    ("routes", "flags", "expected"),
    [
        ({"/jobs/overview": overview()}, [], "no job is running on the Flink cluster"),
        (
            {"/jobs/overview": overview((JOB, "etl", "RUNNING"))},
            ["--job", "nope"],
            f"no job 'nope' on the Flink cluster at URL (running: 'etl' ({JOB}))",
        ),
        (
            {"/jobs/overview": overview((JOB, "etl", "FINISHED"))},
            ["--job", "etl"],
            f"job 'etl' ({JOB}) on URL is FINISHED, not RUNNING",
        ),
        (
            {"/jobs/overview": overview((JOB, "a", "RUNNING"), (VERTEX, "b", "RUNNING"))},
            [],
            "2 jobs are running on URL",
        ),
    ],
)
def test_the_job_to_watch_is_not_there(
    routes: Routes, flags: list[str], expected: str, bpmon_bin: Path, tmp_path: Path
) -> None:
    with serving({"/config": CONFIG, **routes}) as url:
        code, err = run(bpmon_bin, tmp_path, "--flink", url, *flags)
    assert code == 5
    assert expected.replace("URL", url) in one_line(err)


@pytest.mark.parametrize(
    ("version", "missing"),
    [
        ("1.12.7", ["rescaling", "sampler per subtask", "busy and backpressured time"]),
        ("1.16.3", ["rescaling", "sampler per subtask"]),
        ("1.17.2", ["rescaling"]),
    ],
)
def test_a_flink_older_than_supported_is_named_with_what_would_not_work(
    version: str, missing: list[str], bpmon_bin: Path, tmp_path: Path
) -> None:
    """Before reading the job: one line naming the version, the oldest supported, what the
    cluster lacks and the upgrade (1.12 has no busy time, 1.16 no flame graph per subtask, 1.17
    no rescale endpoint)."""
    routes: Routes = {
        "/config": (200, {"flink-version": version}),
        "/jobs/overview": overview((JOB, "legacy", "RUNNING")),
    }
    with serving(routes) as url:
        code, err = run(bpmon_bin, tmp_path, "--flink", url)
    line = one_line(err)
    assert code == 5
    assert f"Flink {version} at {url} is older than bpmon supports (1.18 and newer)" in line
    for what in missing:
        assert what in line
    for what in {"rescaling", "sampler per subtask", "busy and backpressured time"} - {*missing}:
        assert what not in line
    assert "upgrade the cluster to 1.18 or later" in line


def test_the_oldest_supported_flink_is_let_through(bpmon_bin: Path, tmp_path: Path) -> None:
    """1.18.1 passes the version check: the error is then about the job (none running)."""
    routes: Routes = {"/config": (200, {"flink-version": "1.18.1"}), "/jobs/overview": overview()}
    with serving(routes) as url:
        code, err = run(bpmon_bin, tmp_path, "--flink", url)
    line = one_line(err)
    assert code == 5
    assert "older than" not in line and "no job is running on the Flink cluster" in line, line


def test_a_busy_jobmanager_at_first_contact_is_one_line_at_once(
    bpmon_bin: Path, tmp_path: Path
) -> None:
    """The first contact is not retried: what the user typed is checked at once."""
    script = Script({"/config": (503, {"errors": ["leader election"]})})
    with serving(script) as url:
        began = time.monotonic()
        code, err = run(bpmon_bin, tmp_path, "--flink", url)
        spent = time.monotonic() - began
    assert code == 5
    assert f"Flink at {url} answered GET /config with HTTP 503 (leader election)" in one_line(err)
    assert script.count("/config") == 1, spent
