"""The py-spy collector against real processes: a threaded queue pipeline, a dead PID, ``sleep``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bpmon.collectors.observe import observation_from_burst
from bpmon.collectors.profile import load_profile
from bpmon.collectors.pyspy.dumps import PySpySampler, find_py_spy
from bpmon.collectors.sampler import ThreadCounts
from bpmon.model.errors import CollectorError, PermissionDeniedError, TargetNotFoundError
from bpmon.scenario import parse_topology

from .pipelines import TOPOLOGY, running_pipeline, skip_ptrace_denied

TOPOLOGY_TEXT = TOPOLOGY.read_text()


@pytest.fixture(scope="module")
def pipeline() -> Iterator[int]:
    """A running queue_pipeline.py process; skips the module when ptrace is denied here."""
    with running_pipeline() as process:
        try:
            PySpySampler(process.pid, load_profile("python-queue")).dump()
        except PermissionDeniedError as err:
            skip_ptrace_denied(err)
        yield process.pid


def share(counts: ThreadCounts, state: str) -> float:
    return int(getattr(counts, state)) / counts.total


@pytest.mark.slow
def test_pipeline_upload_is_busy_and_upstream_is_backpressured(pipeline: int) -> None:
    profile = load_profile("python-queue")
    burst = PySpySampler(pipeline, profile).burst(samples=20, interval_ms=50)
    # a dump py-spy cannot read is a missed sample, counted apart (rare; more under load)
    assert burst.samples + burst.missed == 20 and burst.samples >= 16, burst
    assert burst.jitter_ms_p99 is not None
    assert share(burst.thread("upload-0"), "busy") >= 0.9
    for stage in ("ingest-0", "transform-0", "transform-1"):
        assert share(burst.thread(stage), "backpressured") >= 0.8, burst.thread(stage)
    assert share(burst.thread("MainThread"), "idle") >= 0.9  # waiting in Event.wait
    obs = observation_from_burst(burst, parse_topology(TOPOLOGY_TEXT), profile, "etl", "pyspy")
    assert [v.parallelism for v in obs.vertices] == [1, 2, 1]


@pytest.mark.slow
def test_pause_mode_reads_the_same_threads(pipeline: int) -> None:
    burst = PySpySampler(pipeline, load_profile("python-queue"), pause=True).burst(5, 50)
    assert {"ingest-0", "transform-0", "transform-1", "upload-0"} <= {t.name for t in burst.threads}


@pytest.mark.slow
def test_dead_pid_is_target_not_found() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=10)
    with pytest.raises(TargetNotFoundError, match=f"PID {dead.pid}"):
        PySpySampler(dead.pid, load_profile("python-queue")).burst(3, 10)


@pytest.mark.slow
def test_a_process_that_is_not_python_is_named_so() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(CollectorError, match="not a Python process") as info:
            PySpySampler(sleeper.pid, load_profile("python-queue")).burst(3, 10)
        assert not isinstance(info.value, (TargetNotFoundError, PermissionDeniedError))
        assert "sleep" in str(info.value)
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("setpriv") is None or os.geteuid() != 0,
    reason="needs root and setpriv to run py-spy as an unprivileged user",
)
def test_unprivileged_py_spy_gets_permission_denied(pipeline: int) -> None:
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(find_py_spy())]
    sampler = PySpySampler(pipeline, load_profile("python-queue"), command=as_nobody)
    with pytest.raises(PermissionDeniedError, match="CAP_SYS_PTRACE") as info:
        sampler.burst(3, 10)
    message = str(info.value)
    assert "ptrace denied" in message and "\n" not in message
    assert "py-spy said '" in message  # its own reason first, then the likely cause
    assert "setpriv --reuid=65534" in message  # the rights that were refused are py-spy's there


def test_missing_py_spy_says_how_to_install_it(tmp_path: Path) -> None:
    missing = [str(tmp_path / "py-spy")]
    sampler = PySpySampler(os.getpid(), load_profile("python-queue"), command=missing)
    with pytest.raises(CollectorError, match="pip install py-spy"):
        sampler.burst(3, 10)
