"""Fixtures shared by the top-level tests: the installed ``bpmon`` command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def bpmon_bin() -> Path:
    """The ``bpmon`` script installed in the interpreter's environment (next to python)."""
    script = Path(sys.executable).parent / "bpmon"
    assert script.is_file(), f"no bpmon script at {script}: run `scripts/setup --test` first"
    return script
