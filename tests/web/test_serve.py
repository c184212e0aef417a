"""The real ``bpmon serve`` command: it serves, it refuses bad set-ups in one line, and a signal
stops every watched job cleanly with the reports already saved intact.

Each server is a child process on a free loopback port (``--port 0``; the port is read from its
announcement), watching the tiny scenario a burst every 0.2 s.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bpmon.model.report_json import report_from_json

from .serve_process import bpmon_serve
from .servers import TOKEN, WAIT_S, tiny, wait_until


@pytest.fixture
def watched_args(tmp_path: Path) -> list[str]:
    """Flags that watch the tiny scenario, a burst every 0.2 s, saving under tmp/runs."""
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(tiny())
    return ["--runs-dir", str(tmp_path / "runs"), "--run", str(scenario), "--every", "0.2"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_every_job_cleanly_and_keeps_the_saved_reports(
    bpmon_bin: Path, tmp_path: Path, watched_args: list[str], stop: signal.Signals
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    with bpmon_serve(bpmon_bin, *watched_args, "--token-file", str(token_file)) as child:
        client = httpx.Client(
            base_url=child.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=WAIT_S
        )
        job = wait_until(lambda: _latest(client), "a report of the watched job")
        assert httpx.get(f"{child.url}/api/v1/jobs").status_code == 401
        metrics = client.get("/metrics")
        names = {f.name for f in text_string_to_metric_families(metrics.text)}
        assert "bpmon_diagnoses" in names
        streamed = _stream_in_background(client)
        child.process.send_signal(stop)
        code, lines = child.finish()
        streamed.join(WAIT_S)
        client.close()
    assert code == 0, lines
    assert lines[-1] == "bpmon: stopped; every watched job ended cleanly"
    assert not any("Traceback" in line for line in lines)
    run = tmp_path / "runs" / job["run_id"]
    names = sorted(p.name for p in run.iterdir())
    files = [name for name in names if name != "bursts.jsonl"]  # the run's manifest
    assert files and all(re.fullmatch(r"report(-\d+)?\.json", name) for name in files), names
    for name in files:  # every report whole: nothing half-written
        assert report_from_json((run / name).read_text()).run_id == job["run_id"]


def _latest(client: httpx.Client) -> dict[str, str] | None:
    doc = client.get("/api/v1/jobs/tiny")
    return doc.json() if doc.status_code == 200 and doc.json()["latest"] else None


def _stream_in_background(client: httpx.Client) -> threading.Thread:
    """A reader on the job's event stream, open before this returns."""
    opened = threading.Event()

    def read() -> None:
        with client.stream("GET", "/api/v1/jobs/tiny/events") as stream:
            for _ in stream.iter_lines():
                opened.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert opened.wait(WAIT_S)
    return reader


def test_stored_runs_are_served_without_watching_anything(
    bpmon_bin: Path, tmp_path: Path, watched_args: list[str]
) -> None:
    with bpmon_serve(bpmon_bin, *watched_args) as child, httpx.Client(base_url=child.url) as c:
        wait_until(lambda: _latest(c), "a report")
        child.process.send_signal(signal.SIGTERM)
        assert child.finish()[0] == 0
    with bpmon_serve(bpmon_bin, "--runs-dir", str(tmp_path / "runs")) as child:
        jobs = httpx.get(f"{child.url}/api/v1/jobs").json()["jobs"]
        assert [(j["job"], j["state"]) for j in jobs] == [("tiny", "stored")]
        child.process.send_signal(signal.SIGTERM)
        assert child.finish()[0] == 0


def _one_line_error(bpmon_bin: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(bpmon_bin), "serve", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpmon: error: "), done.stderr
    return lines[0]


def test_beyond_loopback_a_token_is_required(bpmon_bin: Path) -> None:
    line = _one_line_error(bpmon_bin, "--host", "0.0.0.0", "--port", "0")
    assert "--token-file" in line and "BPMON_TOKEN" in line


def test_a_token_from_the_environment_is_required_on_every_request(bpmon_bin: Path) -> None:
    with bpmon_serve(bpmon_bin, env={"BPMON_TOKEN": TOKEN}) as child:
        assert httpx.get(f"{child.url}/api/v1/jobs").status_code == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{child.url}/api/v1/jobs", headers=headers).status_code == 200
        child.process.send_signal(signal.SIGTERM)
        assert child.finish()[0] == 0


def test_a_port_in_use_is_one_line(bpmon_bin: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        line = _one_line_error(bpmon_bin, "--port", str(taken.getsockname()[1]))
    assert "already in use" in line and "--port" in line


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--run", "no-such-scenario"], "no-such-scenario"),
        (["--every", "0"], "--every"),
        (["--stuck-after", "1"], "--stuck-after 1: must be at least 5 s"),
        (["--profile", "python-queue"], "--monitor-pid"),
        (["--flink-job", "orders"], "--monitor-flink"),
        (["--token-file", "/nonexistent/token"], "--token-file"),
    ],
)
def test_a_bad_set_up_is_one_line_and_exit_code_2(
    bpmon_bin: Path, args: list[str], names: str
) -> None:
    assert names in _one_line_error(bpmon_bin, "--port", "0", *args)


def test_a_malformed_autoscaler_file_is_refused_before_serving(
    bpmon_bin: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "autoscaler.yaml"
    bad.write_text("job.autoscaler.scale-down.max-factor: half\n")
    line = _one_line_error(bpmon_bin, "--port", "0", "--autoscaler-config", str(bad))
    assert line == (
        f"bpmon: error: {bad}:1: job.autoscaler.scale-down.max-factor = 'half': expected a number"
    )


def test_a_flink_that_does_not_answer_is_refused_before_serving(bpmon_bin: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again: nothing listens there
    done = subprocess.run(
        [str(bpmon_bin), "serve", "--port", "0", "--monitor-flink", f"http://127.0.0.1:{port}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 5 and len(lines) == 1, done.stderr
    assert lines[0].startswith("bpmon: error: ") and f"127.0.0.1:{port}" in lines[0]


def test_a_process_that_is_not_there_is_refused_before_serving(bpmon_bin: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    done = subprocess.run(
        [str(bpmon_bin), "serve", "--port", "0", "--monitor-pid", str(gone.pid)],
        check=False,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 5
    expected = f"bpmon: error: --monitor-pid {gone.pid}: no process has PID {gone.pid}"
    assert done.stderr.strip() == expected
