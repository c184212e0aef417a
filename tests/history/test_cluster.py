"""``bpmon analyze --master spark://...`` on a real Spark standalone cluster on loopback.

A master and one worker are started from the pyspark installation's own ``spark-class``, bound
to 127.0.0.1 on free ports, and stopped by PID at the end. ``bpmon analyze`` runs as a user would
run it, in its own process, against the master; the worker's work folder then holds the
application's executor, so the work ran on the cluster, not in the driver.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyspark
import pytest

from bpmon.history.store import HistoryStore
from bpmon.history.synth import SynthPlan, planted_bottleneck, regression_run, run_id, synthesize
from tests.waiting import wait_until

SPARK_HOME = Path(pyspark.__file__).parent
PLAN = SynthPlan(runs=4, jobs=1, start=datetime(2026, 1, 1, tzinfo=UTC), parallelism=3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    """Until ``text`` is in ``log`` (a bound against a hang only; the process must stay up)."""

    def read() -> str:
        written = log.read_text(errors="replace")
        assert text in written or process.poll() is None, written[-2000:]
        return written

    wait_until(
        read, f"{text!r} in {log}", seconds, poll_s=0.1, until=lambda written: text in written
    )


def start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM by PID (spark-class execs the JVM, so the PID is the JVM's), then SIGKILL."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def cluster(java: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``(master URL, the worker's work folder)`` of a running master and worker."""
    root = tmp_path_factory.mktemp("cluster")
    work = root / "work"
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(root),
        "SPARK_WORKER_DIR": str(work),
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log, worker_log = root / "master.log", root / "worker.log"
    master = start(
        [
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())),
        ],
        master_log,
        env,
    )
    worker: subprocess.Popen[bytes] | None = None
    try:
        wait_for(master_log, "I have been elected leader", master, 180)
        worker = start(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                *("--host", "127.0.0.1", "--port", str(free_port())),
                *("--webui-port", str(free_port()), "--cores", "1", "--memory", "1g"),
                *("--work-dir", str(work)),
            ],
            worker_log,
            env,
        )
        wait_for(worker_log, "Successfully registered with master", worker, 180)
        yield url, work
    finally:
        for process in (worker, master):
            if process is not None:
                stop(process)
    assert master.returncode is not None and (worker is None or worker.returncode is not None)


@pytest.mark.slow
def test_analyze_runs_on_a_standalone_cluster(
    cluster: tuple[str, Path], bpmon_bin: Path, tmp_path: Path
) -> None:
    url, work = cluster
    synthesize(HistoryStore.in_runs_dir(tmp_path), PLAN)
    done = subprocess.run(
        [
            str(bpmon_bin),
            "analyze",
            "--master",
            url,
            "--format",
            "json",
            "--runs-dir",
            str(tmp_path),
        ],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"on {url}: session started in" in done.stderr
    doc = json.loads(done.stdout)
    assert doc["master"] == url
    at = regression_run(PLAN)
    assert at is not None
    pair = (run_id(PLAN, 1, at - 1), run_id(PLAN, 1, at))
    assert [
        (r["kind"], r["vertex"], r["before_run"], r["after_run"]) for r in doc["regressions"]
    ] == [("capacity-drop", planted_bottleneck(1), *pair), ("checkpoint-slower", "", *pair)]
    (checkpoints,) = doc["checkpoints"]  # the cluster's executors read the checkpoint columns too
    assert [p["checkpoints"] for p in checkpoints["by_run"]] == [PLAN.bursts] * PLAN.runs
    (autoscaler,) = doc["autoscaler"]  # and the list of verdicts of each vertex's rows
    wrong = (PLAN.runs - at) * PLAN.bursts + at  # from the regression run on, and each first window
    assert (autoscaler["judged"], autoscaler["wrong"]) == (PLAN.runs * PLAN.bursts, wrong)
    assert doc["chronic"][0]["vertex"] == planted_bottleneck(1)
    executors = [p for p in work.glob("app-*/*") if p.is_dir()]
    assert executors, f"no executor ran on the worker: {list(work.rglob('*'))[:20]}"
