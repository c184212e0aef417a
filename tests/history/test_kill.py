"""A writer killed with SIGKILL in the middle of an append loses nothing it acknowledged.

A real process saves reports through the service's one save path (report.json, then the
history) and prints each run id once ``save_report`` has returned. The test kills it at the
moment a part file of the history exists under its temporary name, that is, mid-append; then
every report.json reads, every acknowledged report is in the dataset, the dataset reads with
pyarrow and with Spark, the torn temporary file is named and left, and an import completes
whatever was saved but not yet appended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bpmon.history.importer import import_runs
from bpmon.history.runs import RunStore
from bpmon.history.store import HistoryStore
from bpmon.model.report_json import report_to_json
from bpmon.model.values import Metrics, Report, SubtaskStatus, VertexStatus, Window

T0 = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)

WRITER = textwrap.dedent(
    """
    import sys
    from dataclasses import replace
    from pathlib import Path
    from bpmon.history.runs import RunStore
    from bpmon.model.report_json import report_from_json
    from bpmon.service.facade import save_report

    base = report_from_json(Path(sys.argv[2]).read_text())
    store = RunStore(Path(sys.argv[1]))
    for i in range(100_000):
        report = replace(base, run_id=f"20261122T101500Z-big-{i:05d}")
        save_report(store, report)
        print(report.run_id, flush=True)
    """
)


def big_report() -> Report:
    """A report of 40 vertices x 200 subtasks: an append long enough to be killed inside."""
    metrics = Metrics(busy_ratio=0.5, idle_ratio=0.4, records_in_per_s=100.0)
    subtasks = tuple(SubtaskStatus(i, "LOW", 0.2, metrics) for i in range(200))
    return Report(
        run_id="20261122T101500Z-big-0",
        job="big",
        source="runtime",
        window=Window(T0, T0 + timedelta(seconds=5), samples=100, interval_ms=50.0),
        vertices=tuple(
            VertexStatus(f"v{n}", 200, "LOW", 0.2, subtasks=subtasks) for n in range(40)
        ),
        root_causes=(),
    )


def temporary_parts(history: Path) -> list[Path]:
    return [
        Path(folder) / name
        for folder, _, names in os.walk(history)
        for name in names
        if name.endswith(".tmp")
    ]


def test_a_writer_killed_mid_append_loses_nothing_acknowledged(spark: Any, tmp_path: Path) -> None:
    document = tmp_path / "report.json"
    document.write_text(report_to_json(big_report()))
    runs = tmp_path / "runs"
    history = runs / "history"
    acked: list[str] = []
    caught: list[Path] = []
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(runs), str(document)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as writer:
        assert writer.stdout is not None and writer.stderr is not None
        lines = writer.stdout
        reader = threading.Thread(target=lambda: acked.extend(line.strip() for line in lines))
        reader.start()
        try:
            deadline = time.monotonic() + 120  # guards against a hang only
            while time.monotonic() < deadline and writer.poll() is None:
                if len(acked) >= 3:
                    caught = temporary_parts(history)
                    if caught:
                        os.kill(writer.pid, signal.SIGKILL)
                        break
        finally:
            if writer.poll() is None and not caught:
                writer.kill()
            writer.wait()
            reader.join()
        errors = writer.stderr.read()
    assert caught, f"never saw an append in progress: {errors}"
    assert writer.returncode == -signal.SIGKILL
    assert len(acked) >= 3

    corrupt: list[str] = []
    listed = {r.run_id for r in RunStore(runs).list_runs(lambda e: corrupt.append(str(e)))}
    assert corrupt == [] and set(acked) <= listed

    store = HistoryStore(history)
    scan = store.scan()
    rows = store.read("subtasks", scan)
    assert set(acked) <= set(rows.column("run_id").to_pylist())
    assert rows.num_rows == len(set(rows.column("run_id").to_pylist())) * 40 * 200
    assert all(path.exists() for path in caught)  # left as it is...
    assert any(str(caught[0]) in line for line in scan.skipped)  # ...and named
    frame = spark.read.parquet(*scan.paths("subtasks"))
    assert frame.count() == rows.num_rows

    done = import_runs(store, runs)
    assert done.skipped == () and done.added + done.present == len(listed)
    assert set(store.read("subtasks").column("run_id").to_pylist()) == listed
