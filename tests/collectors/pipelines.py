"""The real Python process the py-spy tests watch: ``queue_pipeline.py``, started and killed.

Every test that samples a real process (the collector's, the CLI's ``bpmon monitor``, the
service's watch, the dashboard's py-spy run) starts it here, so the command, the ``ready``
handshake and the skip where ptrace is denied are written once.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from tests.optional import tool_missing

HERE = Path(__file__).resolve().parent
PIPELINE = HERE / "queue_pipeline.py"
"""ingest -> 2 x transform -> slow upload, threads joined by bounded queues."""
TOPOLOGY = HERE / "etl-topology.toml"
"""The topology file that names the pipeline's stages (job ``etl``)."""


@contextmanager
def running_pipeline(
    seconds: float = 60.0, keeper: str = "event"
) -> Iterator[subprocess.Popen[str]]:
    """A running ``queue_pipeline.py`` (``--keeper`` as given), once it printed ``ready``;
    killed when the block ends. It exits by itself after ``seconds``."""
    argv = [sys.executable, str(PIPELINE), "--seconds", str(seconds), "--keeper", keeper]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"
            yield process
        finally:
            process.kill()


def skip_ptrace_denied(why: object) -> NoReturn:
    """Skip: this machine denies ptrace, so py-spy cannot read a process (``why`` says how); in
    CI, fail, as for every other tool the tests need (``tests/optional.py``)."""
    tool_missing(
        f"ptrace is denied here, py-spy cannot read processes: {why}",
        "the py-spy tests (grant ptrace: run as root or set kernel.yama.ptrace_scope to 0)",
    )
