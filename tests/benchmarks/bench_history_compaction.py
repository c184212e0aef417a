"""The history of a long watch: files, syncs, scans and analyses without and with compaction.

N bursts (default 10,000) of one watch are appended, one window every 10 s of window time (two
days of a job watched at ``--every 10``), each window four vertices of four subtasks (16 subtask
rows) with a root cause in every other window, by three writers, each in a fresh process:

- ``before``: the store as it was before compaction (``--before`` git ref, extracted with
  ``git archive``): every burst two part files, never compacted;
- ``plain``: today's store with compaction off: one part file per healthy window, two with a
  cause;
- ``compacted``: today's store as shipped (appends compact in tiers), then ``maintain`` (past
  days merged into one part) and a second ``maintain`` with nothing to do.

Per writer: the append time per burst (mean, p50, p99, max), the part files written (renames)
and the fsyncs per burst (``os.fsync`` counted inside the writer), and the files and bytes on
disk at the end. Then for each dataset, with today's code in a fresh process:
``HistoryStore.scan`` (the first, then again with the footers remembered), reading both tables
with pyarrow, one DuckDB aggregate over the scanned files; and the real
``bpmon analyze --master local[2]`` (Spark, in its own process). Ratios side by side, the
JSON of every figure last.

    .venv/bin/python tests/benchmarks/bench_history_compaction.py [--bursts 10000] [--no-spark]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
WRITERS = ("before", "plain", "compacted")
EVERY_S = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bursts", type=int, default=10_000)
    parser.add_argument("--before", default="d2c687b~1", help="git ref of the store before")
    parser.add_argument("--no-spark", action="store_true", help="skip bpmon analyze (Spark)")
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    parser.add_argument("--reader", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:  # a measured child: append, print figures as JSON
        print(json.dumps(write(args.writer, args.root, args.bursts)))
        return
    if args.reader:  # a measured child with nothing cached: scan, read, query
        print(json.dumps(read(args.root)))
        return
    work = Path(tempfile.mkdtemp(prefix="bpmon-bench-compaction-"))
    old = extract(args.before, work / "before-src")
    figures: dict[str, Any] = {"bursts": args.bursts, "every_s": EVERY_S}
    for writer in WRITERS:
        runs = work / writer
        env = {**os.environ, "PYTHONPATH": str(old)} if writer == "before" else None
        command = [sys.executable, __file__, "--writer", writer, "--root", str(runs)]
        done = subprocess.run(
            [*command, "--bursts", str(args.bursts)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=work,
        )
        wrote = json.loads(done.stdout.strip().splitlines()[-1])
        reader = [sys.executable, __file__, "--reader", "--root", str(runs)]
        done = subprocess.run(reader, capture_output=True, text=True, check=True, cwd=work)
        figures[writer] = wrote | json.loads(done.stdout.strip().splitlines()[-1])
        if not args.no_spark:
            figures[writer]["analyze_s"] = analyze(runs)
        say(writer, figures[writer])
    figures["ratios"] = ratios(figures)
    for key, value in figures["ratios"].items():
        print(f"  {key:<44} {value:>8}")
    print(json.dumps(figures))


def extract(ref: str, folder: Path) -> Path:
    """The ``bpmon`` package of git ``ref`` in ``folder`` (read-only use of the repository)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref, "bpmon"],
        capture_output=True,
        check=True,
    ).stdout
    folder.mkdir(parents=True)
    tar = folder / "bpmon.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as opened:
        opened.extractall(folder, filter="data")
    return folder


# -- a writer process -----------------------------------------------------------------------------


def write(mode: str, runs: Path, bursts: int) -> dict[str, Any]:
    """Append ``bursts`` windows as writer ``mode``; its figures (in this fresh process)."""
    counts = {"fsync": 0, "replace": 0, "unlink": 0}
    for name in counts:
        real = getattr(os, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            counts[_name] += 1
            return _real(*a, **k)

        setattr(os, name, counted)
    from bpmon.history.store import HistoryStore

    store = HistoryStore(runs / "history", compact=False) if mode == "plain" else None
    store = store or HistoryStore(runs / "history")
    reports = [burst_report(b) for b in range(bursts)]
    times = []
    for burst, report in enumerate(reports):
        began = time.perf_counter()
        store.append(report, burst)
        times.append(time.perf_counter() - began)
    ms = sorted(t * 1000 for t in times)
    out: dict[str, Any] = {
        "append_ms_mean": round(statistics.fmean(ms), 2),
        "append_ms_p50": round(ms[len(ms) // 2], 2),
        "append_ms_p99": round(ms[int(len(ms) * 0.99)], 2),
        "append_ms_max": round(ms[-1], 1),
        "parts_written_per_burst": round(counts["replace"] / bursts, 3),
        "fsyncs_per_burst": round(counts["fsync"] / bursts, 3),
        "files_after_appends": files(runs / "history"),
    }
    if mode == "compacted":
        out |= maintained(runs, reports[-1].window.end)
    return out


def maintained(runs: Path, now: Any) -> dict[str, Any]:
    """Two ``maintain`` calls at the end of the watch: the work, then nothing to do."""
    from bpmon.service.facade import Settings
    from bpmon.service.history import maintain

    settings = Settings(runs_dir=runs, now=lambda: now)
    began = time.perf_counter()
    first = maintain(settings)
    first_s = time.perf_counter() - began
    began = time.perf_counter()
    maintain(settings)
    assert not first.problems, first.problems
    return {
        "maintain_s": round(first_s, 2),
        "maintain_again_ms": round((time.perf_counter() - began) * 1000, 1),
    }


def burst_report(burst: int) -> Any:
    """Burst ``burst`` of the watch: 4 vertices x 4 subtasks, a root cause every other one."""
    from datetime import UTC, datetime, timedelta

    from bpmon.model.evidence import EvidenceLine
    from bpmon.model.values import Metrics, Report, RootCause, SubtaskStatus, VertexStatus, Window

    start = datetime(2026, 11, 22, 10, 15, tzinfo=UTC) + timedelta(seconds=EVERY_S * burst)
    metrics = Metrics(busy_ratio=0.5, idle_ratio=0.4, records_in_per_s=100.0 + burst % 7)
    subtasks = tuple(SubtaskStatus(i, "LOW", 0.2, metrics) for i in range(4))
    busy = (EvidenceLine.of_text("busy"),)
    cause = RootCause("sink", "slow-sink", (0,), 0.9, busy, "Scale.", 990.0)
    return Report(
        run_id="20261122T101500Z-watch-0001",
        job="watch",
        source="runtime",
        window=Window(start, start + timedelta(seconds=5), samples=100, interval_ms=50.0),
        vertices=tuple(VertexStatus(v, 4, "LOW", 0.2, subtasks=subtasks) for v in "abcd"),
        root_causes=(cause,) if burst % 2 else (),
    )


def files(folder: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(folder))


# -- reading, with today's code ------------------------------------------------------------------


def read(runs: Path) -> dict[str, Any]:
    """Scan, read and query the dataset in ``runs`` with today's code, in a fresh process: the
    first scan opens every footer, the next ones find them remembered (a long-lived server)."""
    from bpmon.history.store import HistoryStore

    store = HistoryStore.in_runs_dir(runs)
    scans = []
    for _ in range(3):
        began = time.perf_counter()
        scan = store.scan()
        scans.append(time.perf_counter() - began)
    began = time.perf_counter()
    rows = store.read("subtasks", scan).num_rows + store.read("causes", scan).num_rows
    read_s = time.perf_counter() - began
    parquet = list((runs / "history").rglob("*.parquet"))
    return {
        "files": files(runs / "history"),
        "parts_read": len(scan.subtasks) + len(scan.causes),
        "mib": round(sum(p.stat().st_size for p in parquet) / 2**20, 2),
        "scan_s": round(scans[0], 3),
        "scan_again_s": round(statistics.median(scans[1:]), 3),
        "read_s": round(read_s, 3),
        "rows": rows,
        "duckdb_s": duckdb_query(scan.paths("subtasks")),
    }


def duckdb_query(paths: list[str]) -> float | None:
    """One aggregate per vertex over the subtask parts (the first pass of an analysis)."""
    try:
        import duckdb
    except ImportError:
        return None
    began = time.perf_counter()
    duckdb.connect().execute(
        "SELECT vertex, count(*), avg(busy_ratio), max(ratio) FROM read_parquet(?) GROUP BY vertex",
        [paths],
    ).fetchall()
    return round(time.perf_counter() - began, 3)


def analyze(runs: Path) -> float:
    """Wall seconds of the real ``bpmon analyze --master local[2]`` over ``runs``."""
    bpmon = Path(sys.executable).parent / "bpmon"
    began = time.monotonic()
    subprocess.run(
        [
            str(bpmon),
            "analyze",
            "--master",
            "local[2]",
            "--format",
            "json",
            "--runs-dir",
            str(runs),
        ],
        capture_output=True,
        check=True,
    )
    return round(time.monotonic() - began, 1)


def say(writer: str, f: dict[str, Any]) -> None:
    print(
        f"{writer:<10} append {f['append_ms_mean']:6.2f} ms (p99 {f['append_ms_p99']:6.2f}, max "
        f"{f['append_ms_max']:6.1f})  {f['parts_written_per_burst']:.3f} parts and "
        f"{f['fsyncs_per_burst']:.2f} fsyncs per burst  files {f['files']:>6,}  scan "
        f"{f['scan_s']:6.3f} s (again {f['scan_again_s']:.3f} s)  read {f['read_s']:6.3f} s  "
        f"duckdb {f['duckdb_s']} s" + (f"  analyze {f['analyze_s']} s" if "analyze_s" in f else ""),
        flush=True,
    )


def ratios(figures: dict[str, Any]) -> dict[str, float]:
    """Before over compacted (and plain over compacted) for what compaction changes."""
    out = {}
    keys = ("files", "mib", "scan_s", "scan_again_s", "read_s", "duckdb_s", "analyze_s")
    for key in (*keys, "fsyncs_per_burst", "parts_written_per_burst"):
        for other in ("before", "plain"):
            a, b = figures[other].get(key), figures["compacted"].get(key)
            if a and b:
                out[f"{key} {other}/compacted"] = round(a / b, 1)
    return out


if __name__ == "__main__":
    main()
