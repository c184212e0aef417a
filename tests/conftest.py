"""Fixtures shared by the top-level tests: the installed ``bpmon`` command, Prometheus's tools."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest


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
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the Prometheus tests", pytrace=False)
        pytest.skip(reason)
    return Path(found)


@pytest.fixture(scope="session")
def promtool() -> Path:
    """Prometheus's rule and exposition checker."""
    return _prometheus_tool("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> Path:
    """The Prometheus server."""
    return _prometheus_tool("prometheus")
