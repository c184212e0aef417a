"""Optional tools (Prometheus, Java for Spark): a test that needs one skips where it is missing,
with the reason and the fix, and fails in CI (``CI`` set), where every tool must be there."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def tool_missing(reason: str, tests: str) -> NoReturn:
    """Skip: ``reason`` (what is missing and what installs it); in CI, fail: ``tests`` must run."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run {tests}", pytrace=False)
    pytest.skip(reason)
