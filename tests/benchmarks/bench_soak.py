"""A soak of ``bpmon serve``: four jobs watched a burst a second for a long time, then a restart
over a big runs directory.

**Soak.** A real ``bpmon serve --run demo --run hot-key --run slow-sink --run fan-in --every 1``
runs as a child process on a free loopback port for ``--minutes`` (default 30). Every
``--poll`` seconds (default 5) the benchmark asks ``/healthz`` (1 s timeout) and reads the
server's resident memory (``VmRSS``), its threads and the files of its runs directory and of
its Parquet history. At the end the server gets SIGTERM, as an operator would stop it, and must
exit 0 within 5 s; then every report on disk is read back. What must hold, as the issue puts it:
``/healthz`` answers within 1 s every time, every report on disk is valid, the RSS after the
warm-up (``--warmup`` minutes, default a sixth of the run) grows less than 20 MB, and the
history's file count stays bounded (compaction) while the bursts grow.

**Restart.** A runs directory of ``--bursts`` stored bursts (default 10,000: four jobs, one long
run each, as a week-long watch leaves them; saved by bpmon's own store) is served by a fresh
``bpmon serve``; the time from its ``/healthz`` answering to ``/api/v1/jobs`` listing every job
with its history must be under 2 s. Side by side, the alternative a reader of the runs directory
has without the manifests (and what bpmon did before them): reading every report, timed here
in one process; the ratio is printed.

The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_soak.py [--minutes 30] [--bursts 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import httpx

from bpmon.history.runs import RunStore, read_report
from bpmon.model.report_json import report_from_json

JOBS = ("demo", "hot-key", "slow-sink", "fan-in")
"""The shipped examples watched (their job names are what ``bpmon examples`` runs)."""
HEALTH_TIMEOUT_S = 1.0
RSS_GROWTH_LIMIT_MB = 20.0
RESTART_LIMIT_S = 2.0
STOP_LIMIT_S = 5.0
HISTORY_FILES_PER_JOB = 80
"""What compaction keeps a job-day's Parquet history to, whatever the bursts: at most 31 single
parts and a few compacted ones per table (``docs/history.md``), both tables."""


@dataclass
class Poll:
    """One look at the server: when, /healthz, memory, threads, files."""

    at_s: float
    health_status: int | None
    health_ms: float | None
    rss_mb: float
    threads: int
    reports: int
    history_files: int


@dataclass
class Soak:
    """What the soak saw."""

    polls: list[Poll] = field(default_factory=list)
    stop_s: float = 0.0
    exit_code: int | None = None
    reports: int = 0
    invalid: list[str] = field(default_factory=list)
    stderr_tail: str = ""
    stderr_lines: int = 0


def bpmon_bin() -> str:
    """The ``bpmon`` script beside this interpreter."""
    return str(Path(sys.executable).with_name("bpmon"))


class Server:
    """A ``bpmon serve`` child process, its URL, and the tail of what it wrote on stderr (read
    all along on a thread: a full pipe would block the server)."""

    def __init__(self, runs_dir: Path, *flags: str) -> None:
        self.process = subprocess.Popen(
            [bpmon_bin(), "serve", "--port", "0", "--runs-dir", str(runs_dir), *flags],
            stderr=subprocess.PIPE,
            text=True,
        )
        self.tail: deque[str] = deque(maxlen=200)
        self.lines = 0
        found = queue.Queue[str | None]()
        self._drainer = threading.Thread(target=self._drain, args=(found,), daemon=True)
        self._drainer.start()
        url = found.get(timeout=120)
        if url is None:
            raise SystemExit(f"bpmon serve ended before serving: {''.join(self.tail)[-500:]}")
        self.url = url

    def _drain(self, found: queue.Queue[str | None]) -> None:
        assert self.process.stderr is not None
        announced = False
        for line in self.process.stderr:
            self.tail.append(line)
            self.lines += 1
            match = re.search(r"serving (https?://\S+)", line)
            if match and not announced:
                announced = True
                found.put(match.group(1))
        if not announced:
            found.put(None)

    def stop(self) -> tuple[int, float]:
        """SIGTERM, as an operator stops it: its exit code and how long it took."""
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        took = time.monotonic() - began
        self._drainer.join(10)  # the pipe ends with the process
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code, took


def status_of(pid: int) -> tuple[float, int]:
    """Resident memory (MB) and thread count of process ``pid`` (Linux's /proc)."""
    rss_kb, threads = 0, 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss_kb / 1024, threads


def count_files(folder: Path, pattern: str) -> int:
    """Files under ``folder`` whose name matches ``pattern`` (a regex)."""
    match = re.compile(pattern).fullmatch
    return sum(1 for _, _, names in os.walk(folder) for n in names if match(n))


def health(url: str) -> tuple[int | None, float | None, str]:
    """``/healthz``'s status and latency (ms), or None, None and why it did not answer in time.

    Every probe opens a connection of its own, as a health checker (Kubernetes, a load balancer)
    does. On one kept alive, a probe every 5 s races the server's 5 s keep-alive timeout: now and
    then the server closes the idle connection just as the request leaves, and the probe reads
    "connection reset by peer" from a server that is fine (seen in CI, reproduced by sending at
    the timeout's end).
    """
    began = time.perf_counter()
    try:
        with httpx.Client(base_url=url, timeout=HEALTH_TIMEOUT_S) as client:
            status = client.get("/healthz").status_code
    except httpx.HTTPError as exc:
        return None, None, f"{type(exc).__name__}: {exc}"
    return status, (time.perf_counter() - began) * 1000, ""


def soak(runs_dir: Path, minutes: float, poll_s: float) -> Soak:
    """Serve the four jobs for ``minutes``, looking every ``poll_s``; stop it; read it all."""
    flags = [f for job in JOBS for f in ("--run", job)]
    server = Server(runs_dir, *flags, "--every", "1")
    seen = Soak()
    began = time.monotonic()
    try:
        while (elapsed := time.monotonic() - began) < minutes * 60:
            status, latency, why = health(server.url)
            rss, threads = status_of(server.process.pid)
            reports = count_files(runs_dir, r"report(-\d+)?\.json")
            parts = count_files(runs_dir / "history", r".*\.parquet")
            seen.polls.append(Poll(elapsed, status, latency, rss, threads, reports, parts))
            print(
                f"  {elapsed / 60:5.1f} min  healthz {status} {latency or 0:6.1f} ms  "
                f"rss {rss:6.1f} MB  threads {threads:3d}  reports {reports:6d}  "
                f"history files {parts:5d}" + (f"  ({why})" if why else ""),
                flush=True,
            )
            time.sleep(max(0.0, poll_s - (time.monotonic() - began - elapsed)))
    finally:
        seen.exit_code, seen.stop_s = server.stop()
        seen.stderr_tail = "".join(server.tail)[-2000:]
        seen.stderr_lines = server.lines
    for path in runs_dir.glob("*/report*.json"):
        seen.reports += 1
        try:
            report_from_json(path.read_text(encoding="utf-8"))
        except Exception as exc:  # any way a report is not valid is a failure of the soak
            seen.invalid.append(f"{path.name}: {exc}")
    return seen


def rss_growth_mb(polls: list[Poll], warmup_min: float) -> float:
    """Memory growth after the warm-up: the median of the last three readings less the median
    of the first three after the warm-up (single readings jump with the garbage collector)."""
    after = [p.rss_mb for p in polls if p.at_s >= warmup_min * 60]
    if len(after) < 6:
        after = [p.rss_mb for p in polls[len(polls) // 2 :]]
    if len(after) < 2:
        return 0.0
    k = min(3, len(after) // 2)
    return statistics.median(after[-k:]) - statistics.median(after[:k])


def fill(runs_dir: Path, template: Path, bursts: int) -> list[Path]:
    """``bursts`` stored bursts in four long runs (one per job), saved by bpmon's store."""
    store = RunStore(runs_dir)
    base = read_report(template)
    files = []
    per_job = bursts // len(JOBS)
    for n, job in enumerate(JOBS):
        run_id = f"20261101T000000Z-{job}-{n:04x}"
        for k in range(per_job):
            shift = timedelta(seconds=10 * k)
            window = replace(
                base.window, start=base.window.start + shift, end=base.window.end + shift
            )
            files.append(store.save(replace(base, run_id=run_id, job=job, window=window), k))
    return files


def restart(runs_dir: Path) -> dict[str, float | int | bool]:
    """Serve ``runs_dir`` afresh: how long until /healthz, then until /api/v1/jobs lists all."""
    spawned = time.monotonic()
    server = Server(runs_dir)
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            while health(server.url)[0] != 200:
                time.sleep(0.01)
            up = time.monotonic()
            jobs = client.get("/api/v1/jobs").json()["jobs"]
            answered = time.monotonic()
            listed = {j["job"] for j in jobs if j["updated"]}
            history = len(client.get(f"/api/v1/jobs/{JOBS[0]}?limit=1000").json()["history"])
    finally:
        code, _ = server.stop()
    return {
        "startup_s": round(up - spawned, 3),
        "jobs_answer_s": round(answered - up, 3),
        "all_jobs_listed": listed >= set(JOBS),
        "history_shown": history,
        "exit_code": code,
    }


def read_everything(files: list[Path]) -> float:
    """Seconds to read every report, the way an index without manifests has to."""
    began = time.perf_counter()
    for path in files:
        read_report(path)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> dict[str, object]:
    """Soak, then restart; print the figures, the JSON object last; return them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the soak lasts")
    parser.add_argument("--warmup", type=float, default=None, help="minutes of warm-up")
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between looks")
    parser.add_argument("--bursts", type=int, default=10_000, help="bursts of the restart")
    args = parser.parse_args(argv)
    warmup = args.minutes / 6 if args.warmup is None else args.warmup
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs"
        print(f"soak: 4 jobs at a burst a second for {args.minutes:g} min", flush=True)
        seen = soak(runs, args.minutes, args.poll)
        template = next(runs.glob("*/report.json"))
        print(f"restart over {args.bursts:,} stored bursts", flush=True)
        big = Path(folder) / "big"
        files = fill(big, template, args.bursts)
        again = restart(big)
        baseline_s = read_everything(files)
    answered = [p for p in seen.polls if p.health_status == 200]
    latencies = [p.health_ms for p in answered if p.health_ms is not None]
    growth = rss_growth_mb(seen.polls, warmup)
    result: dict[str, object] = {
        "minutes": args.minutes,
        "polls": len(seen.polls),
        "healthz_answered": len(answered),
        "healthz_max_ms": round(max(latencies), 1) if latencies else None,
        "rss_start_mb": round(seen.polls[0].rss_mb, 1) if seen.polls else None,
        "rss_end_mb": round(seen.polls[-1].rss_mb, 1) if seen.polls else None,
        "rss_growth_after_warmup_mb": round(growth, 1),
        "threads_max": max((p.threads for p in seen.polls), default=0),
        "reports": seen.reports,
        "invalid_reports": len(seen.invalid),
        "history_files_end": seen.polls[-1].history_files if seen.polls else 0,
        "history_files_max": max((p.history_files for p in seen.polls), default=0),
        "stop_s": round(seen.stop_s, 2),
        "stderr_lines": seen.stderr_lines,
        "exit_code": seen.exit_code,
        "restart_bursts": len(files),
        **{f"restart_{k}": v for k, v in again.items()},
        "read_every_report_s": round(baseline_s, 2),
    }
    ratio = baseline_s / max(float(again["jobs_answer_s"]), 1e-3)
    result["restart_speedup"] = round(ratio, 1)
    print(
        f"healthz: {len(answered)}/{len(seen.polls)} answered, max {result['healthz_max_ms']} ms;"
        f" RSS {result['rss_start_mb']} -> {result['rss_end_mb']} MB (growth after the warm-up "
        f"{growth:.1f} MB); {seen.reports:,} reports, {len(seen.invalid)} invalid; history "
        f"files at the end {result['history_files_end']} (max {result['history_files_max']}); "
        f"SIGTERM -> exit {seen.exit_code} in {seen.stop_s:.2f} s"
    )
    print(
        f"restart over {len(files):,} bursts: /api/v1/jobs in {again['jobs_answer_s']} s after "
        f"/healthz (all listed: {again['all_jobs_listed']}); reading every report instead: "
        f"{baseline_s:.1f} s ({ratio:.0f}x)"
    )
    if seen.invalid:
        print("invalid:", *seen.invalid[:5], sep="\n  ")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
