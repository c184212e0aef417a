"""Fixtures of the server tests: real stored runs and a real uvicorn on loopback.

The dashboard's runs (:mod:`.dashboard_runs`: the lookup chain before and after its bottleneck
moved, the hot key, the checkpointed examples, a py-spy'd process) are made once per session
and shared by the page tests and the browser tests, each of which copies them where it may
change them.

Every server here is uvicorn serving :func:`bpmon.web.app.create_app` on a socket bound to
127.0.0.1 port 0 (a free port), run on a thread and stopped as ``bpmon serve`` stops: uvicorn
shuts down, the event streams end, the app's lifespan stops every watch.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bpmon.model.errors import PermissionDeniedError
from bpmon.model.values import Report
from bpmon.scenario import parse_scenario
from bpmon.service import facade
from bpmon.service.stored import StoredJobs
from bpmon.service.watching import Watches
from bpmon.web.app import create_app
from bpmon.web.server import bind, make_server, url_of
from tests.collectors.pipelines import running_pipeline, skip_ptrace_denied

from .dashboard_runs import (
    Chain,
    Checkpointed,
    checkpoint_runs,
    moved_bottleneck_runs,
    pyspy_runs,
    skew_run,
)
from .servers import WAIT_S, Served, ServeFactory, task_threads, tiny, wait_until


@pytest.fixture
def tiny_file(tmp_path: Path) -> Path:
    """A tiny scenario file (job ``tiny``)."""
    path = tmp_path / "tiny.toml"
    path.write_text(tiny())
    return path


@pytest.fixture(scope="session")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs directory holding real runs: job ``alpha`` twice (1 and 2 bursts), ``beta`` once."""
    root = tmp_path_factory.mktemp("stored") / "runs"
    settings = facade.Settings(runs_dir=root)
    for name, bursts in [("alpha", 1), ("alpha", 2), ("beta", 1)]:
        scenario = parse_scenario(tiny(name))
        events = facade.run_scenario(scenario, settings, bursts=bursts, duration_s=0.1)
        facade.drain(events)
    return root


@pytest.fixture(scope="session")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Chain:
    """A runs directory with the lookup chain before and after its bottleneck moved."""
    folder = tmp_path_factory.mktemp("chain")
    before, after = moved_bottleneck_runs(folder / "runs", folder)
    return folder / "runs", before, after


@pytest.fixture(scope="session")
def skew(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    """A runs directory with one run of the hot key (data skew at aggregate, subtask 0)."""
    runs = tmp_path_factory.mktemp("skew") / "runs"
    return runs, skew_run(runs)


@pytest.fixture(scope="session")
def checkpointed(tmp_path_factory: pytest.TempPathFactory) -> Checkpointed:
    """A runs directory with checkpoint-timeouts (3 bursts: its checkpoints fail behind the
    backpressure of enrich), healthy-filter (2 bursts: quick checkpoints) and plain (none)."""
    runs = tmp_path_factory.mktemp("checkpointed") / "runs"
    return runs, checkpoint_runs(runs)


@pytest.fixture(scope="session")
def pyspy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report, Report]:
    """A runs directory with a real threaded pipeline watched by py-spy without a topology file
    and with one; skipped where ptrace is denied (as the py-spy collector's tests are)."""
    runs = tmp_path_factory.mktemp("pyspy") / "runs"
    with running_pipeline(seconds=120) as process:
        try:
            bare, etl = pyspy_runs(runs, process.pid)
        except PermissionDeniedError as err:
            skip_ptrace_denied(err)
    return runs, bare, etl


@pytest.fixture
def runs_dir(stored: Path, tmp_path: Path) -> Path:
    """A copy of the stored runs this test may change."""
    copy = tmp_path / "runs"
    shutil.copytree(stored, copy)
    return copy


@pytest.fixture
def serve() -> Iterator[ServeFactory]:
    """Start servers as the test asks (``serve(watches, token=..., metrics_public=...)``);
    each is stopped at the end as ``bpmon serve`` stops, and no runtime thread may be left."""
    running: list[Served] = []

    def start(watches: Watches, *, token: str | None = None, **options: Any) -> Served:
        sock = bind("127.0.0.1", 0)
        app = create_app(watches, token=token, keepalive_s=0.5, **options)
        server = make_server(app, watches)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        wait_until(lambda: server.started, "the server to start")
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        client = httpx.Client(base_url=url_of(sock), headers=headers, timeout=WAIT_S)
        served = Served(url_of(sock), watches, client, server, thread)
        running.append(served)
        return served

    yield start
    for served in running:
        served.stop()
    assert task_threads() == []


@pytest.fixture
def watches(runs_dir: Path) -> Watches:
    """A registry over the copied runs, bursts 0.2 s apart, the runs re-read on every call."""
    settings = facade.Settings(runs_dir=runs_dir)
    return Watches(settings, every_s=0.2, stored=StoredJobs(settings, ttl_s=0))
