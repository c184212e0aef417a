"""The lower layers stay light: importing them pulls in none of the heavy dependencies."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pyspark", "fastapi", "plotly", "prometheus_client", "typer", "rich", "uvicorn", "pyarrow")


@pytest.mark.parametrize(
    "module",
    [
        "bpmon",
        "bpmon.model.values",
        "bpmon.scenario",
        "bpmon.runtime.job",
        "bpmon.collectors.inprocess",
        "bpmon.rules.engine",
        "bpmon.service.facade",
        "bpmon.cli.entry",  # the console script's: typer comes once Ctrl-C is handled
    ],
)
def test_module_imports_no_heavy_dependency(module: str) -> None:
    code = f"import sys, {module}\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"


def test_importing_the_runtime_starts_no_thread() -> None:
    code = "import threading, bpmon.runtime.job; print(threading.active_count())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
