"""Fixtures shared across the tests: the installed ``bpmon`` command, Prometheus's tools, the
shipped examples' runs; and how pytest-xdist shares the work out."""

from __future__ import annotations

import io
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from tests.diagnosis.watched import ShippedRuns
from tests.optional import tool_missing


@pytest.fixture(scope="session")
def bpmon_bin() -> Path:
    """The ``bpmon`` script installed in the interpreter's environment (next to python)."""
    script = Path(sys.executable).parent / "bpmon"
    assert script.is_file(), f"no bpmon script at {script}: run `scripts/setup --test` first"
    return script


def _prometheus_tool(name: str) -> Path:
    """Debian's ``name`` (package ``prometheus``); skipped where missing, but never in CI."""
    found = shutil.which(name)
    if found is None:
        reason = f"{name} is not installed: scripts/setup --test installs it (Debian's prometheus)"
        tool_missing(reason, "the Prometheus tests")
    return Path(found)


@pytest.fixture(scope="session")
def promtool() -> Path:
    """Prometheus's rule and exposition checker."""
    return _prometheus_tool("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> Path:
    """The Prometheus server."""
    return _prometheus_tool("prometheus")


def _drawn(draw: Callable[[Console], object], width: int) -> str:
    """What a real rich console of ``width`` columns shows for ``draw`` (plain text)."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    draw(console)
    return console.export_text()


def assert_fits(draw: Callable[[Console], object], width: int, also: str = "") -> str:
    """``draw`` shown at ``width`` columns: no line is longer and no word is split over lines.

    A word is split when a piece of it stands alone: a token of the narrow text that is not a
    token of the same drawing on a very wide console, but is part of one (``slow-op``), or an
    ellipsis that cut one short. ``also``: text shown only when narrow (a note of the columns
    left out), whose words are whole. Returns the narrow text.
    """
    narrow = _drawn(draw, width)
    wide_words = set(_drawn(draw, 1000).split()) | set(also.split())
    too_long = [line for line in narrow.splitlines() if len(line.rstrip()) > width]
    assert not too_long, f"lines wider than {width}:\n" + "\n".join(too_long)
    broken = [
        word
        for word in set(narrow.split())
        if word not in wide_words
        and word.strip("─")
        and ("…" in word or any(word in whole and word != whole for whole in wide_words))
    ]
    assert not broken, f"words split at {width} columns: {sorted(broken)}\n{narrow}"
    return narrow


@pytest.fixture
def away_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone five hours behind UTC, so local and UTC readings differ."""
    monkeypatch.setenv("TZ", "EST+05")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(scope="session")
def shipped_runs(tmp_path_factory: pytest.TempPathFactory) -> ShippedRuns:
    """The shipped examples, each run on the real runtime once a session when first asked for
    (one shortened burst after its warm-up: ``tests/diagnosis/watched.py``)."""
    return ShippedRuns(tmp_path_factory.mktemp("shipped-runs"))


@pytest.fixture(scope="session")
def fits() -> Callable[..., str]:
    """:func:`assert_fits`: a table drawn at 80 or 120 columns fits and breaks no word."""
    return assert_fits


SHARED_WORK = {
    "tests/collectors/flink/test_e2e.py": "flink",
    "tests/collectors/flink/test_corpus.py": "flink",
    "tests/collectors/flink/test_checkpoints_e2e.py": "flink",
    "tests/collectors/flink/test_verify.py": "flink-adaptive",
    "tests/collectors/flink/test_chaos.py": "flink-adaptive",
    "tests/diagnosis/test_diagnosis_e2e.py": "shipped-runs",
    "tests/rules/test_evidence_consistency.py": "shipped-runs",
}
"""Modules that share a session's expensive fixture: a Flink cluster (``flink_cluster``,
``adaptive_cluster``) or the shipped examples' runs (``shipped_runs``). Each group runs on one
worker, which makes the shared thing once. (A module left out still passes: its worker makes
one of its own.)"""

LONGEST_FIRST = (
    "flink",  # ~410 s on one worker, the cluster's start included (test_checkpoints_e2e ~90 s)
    "shipped-runs",  # ~235 s
    "tests/collectors/flink/test_flame_e2e.py",  # ~165 s: its cluster, slow-map, 3 SQL jobs
    "tests/diagnosis/test_checkpoint_corpus.py",  # ~150 s: 14 jobs of ~10 s
    "tests/service/test_soak.py",  # ~140 s, one test
    "flink-adaptive",  # ~140 s
    "tests/cli/test_cli.py",  # ~130 s
    "tests/collectors/flink/test_checkpoint_state.py",  # ~100 s, its cluster's start included
    "tests/runtime/test_fidelity.py",
    "tests/web/test_stopping.py",
    "tests/collectors/flink/test_slot_failures.py",
    "tests/collectors/flink/test_clusters_e2e.py",  # ~65 s, its cluster's start included
    "tests/history/test_cluster.py",
    "tests/web/test_browser.py",
    "tests/history/test_analytics.py",
    "tests/collectors/test_frames.py",
    "tests/web/test_serve.py",
    "tests/rules/test_scheduling.py",
    "tests/prometheus/test_prometheus_server.py",
)
"""The work that takes longest on one worker, longest first (from ``--durations=0`` of a CI
run on four workers): each worker takes the next when it is nearly done with its own, so the
longest start first and the short modules fill in at the end, and no worker ends the run alone
with a long one."""


def _scope(nodeid: str) -> str:
    """What runs on one worker: a module, or a group of modules of :data:`SHARED_WORK`."""
    module = nodeid.split("::", 1)[0]
    return SHARED_WORK.get(module, module)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the longest work first: every worker sorts its collection alike, and
    the scheduler queues the scopes in that order. (On a worker, xdist's ``workerinput`` is set,
    while ``-n`` reads as none.)"""
    if hasattr(config, "workerinput"):
        first = {scope: rank for rank, scope in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: first.get(_scope(item.nodeid), len(first)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With pytest-xdist (``-n``), a module's tests run on one worker, so its module-scoped runs
    are made once, and the modules of :data:`SHARED_WORK` share a worker and what they share.

    (xdist's own ``--dist loadgroup`` marks no longer group anything under pytest 9.2, whose
    node ids xdist can no longer suffix; a scheduler of our own does not depend on that.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    # xdist would queue the scopes by their number of tests (the soak, one test, last of all);
    # the collection's own order is LONGEST_FIRST's
    config.option.loadscopereorder = False
    return ByModule(config, log)
