"""Load on ``bpmon serve``: 100 concurrent clients against a job's API and /metrics.

A real ``bpmon serve`` runs as a child process on a free loopback port, watching three small
scenarios on bpmon's runtime (a burst every ``--every`` seconds, saved like ``bpmon run``). Once
each job has a report, ``--clients`` clients (one asyncio loop, httpx, one connection each) send
requests back to back for ``--seconds``: each client alternates ``GET /api/v1/jobs/{job}`` (the
three jobs in turn) and ``GET /metrics``. A request that fails or answers anything but 200 is an
error. Then the server is stopped with SIGTERM, as an operator would, and must exit 0.

Figures: requests per second, p50 and p99 latency per endpoint and overall, the error count. On
a 2-core machine the server shares the cores with the three jobs and the clients, so the figures
are a floor, not a ceiling: the CPU seconds of the server and of the clients are given too (the
clients, httpx in one process, take more than the server). The last line is a JSON object of
the figures.

    .venv/bin/python tests/benchmarks/bench_serve.py [--seconds 60] [--clients 100] [--every 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

SCENARIO = """
name = "{name}"
duration_s = 10

[monitor]
warmup_s = 0.5
samples = 40
interval_ms = 25

[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = {rate}

[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = {cost}
inputs = [{{ from = "source", partitioner = "rebalance" }}]

[[operators]]
name = "sink"
kind = "sink"
cost_us = 20
inputs = [{{ from = "enrich" }}]
"""
JOBS = {"bench-busy": (800, 2000), "bench-ok": (200, 100), "bench-skew": (600, 1500)}
"""Job name -> (records/s per source subtask, cost of enrich in microseconds)."""


@dataclass
class Tally:
    """Latencies (seconds) and errors of one endpoint."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_server(runs_dir: Path, every: float) -> tuple[subprocess.Popen[str], str]:
    """``bpmon serve --port 0`` watching the three jobs; the process and its URL."""
    runs = []
    for name, (rate, cost) in JOBS.items():
        path = runs_dir.parent / f"{name}.toml"
        path.write_text(SCENARIO.format(name=name, rate=rate, cost=cost))
        runs += ["--run", str(path)]
    bpmon = Path(sys.executable).parent / "bpmon"
    command = [str(bpmon), "serve", "--port", "0", "--runs-dir", str(runs_dir), "--every"]
    server = subprocess.Popen([*command, str(every), *runs], stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    for line in server.stderr:
        found = re.search(r"serving (http://\S+)", line)
        if found:
            return server, found.group(1)
    raise SystemExit(f"bpmon serve ended before serving (exit code {server.wait()})")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_reports(url: str, timeout: float = 120.0) -> None:
    """Until every watched job has a report."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=url) as client:
        while time.monotonic() < deadline:
            jobs = client.get("/api/v1/jobs").json()["jobs"]
            if sum(1 for j in jobs if j["job"] in JOBS and j["updated"]) == len(JOBS):
                return
            time.sleep(0.2)
    raise SystemExit("the watched jobs made no report in time")


async def client_loop(
    client: httpx.AsyncClient, index: int, deadline: float, tallies: dict[str, Tally]
) -> None:
    """One client: job API and /metrics in turn until ``deadline``."""
    jobs = list(JOBS)
    turn = index
    while time.monotonic() < deadline:
        path = "/metrics" if turn % 2 else f"/api/v1/jobs/{jobs[(turn // 2) % len(jobs)]}"
        key = "/metrics" if turn % 2 else "/api/v1/jobs/{job}"
        turn += 1
        began = time.perf_counter()
        try:
            response = await client.get(path)
            ok = response.status_code == 200
        except httpx.HTTPError:
            ok = False
        tallies[key].latencies.append(time.perf_counter() - began)
        if not ok:
            tallies[key].errors += 1


async def load(url: str, clients: int, seconds: float) -> tuple[dict[str, Tally], float]:
    """``clients`` clients for ``seconds``; the tallies and the time it really took.

    Each client has an ``httpx.AsyncClient`` of its own (one keep-alive connection): a single
    client shared by a hundred tasks spends more CPU in its connection pool than the server
    spends answering.
    """
    tallies = {"/api/v1/jobs/{job}": Tally(), "/metrics": Tally()}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    pool = [httpx.AsyncClient(base_url=url, limits=limits, timeout=30.0) for _ in range(clients)]
    try:
        began = time.monotonic()
        deadline = began + seconds
        await asyncio.gather(*(client_loop(c, i, deadline, tallies) for i, c in enumerate(pool)))
        return tallies, time.monotonic() - began
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))


def figures(tallies: dict[str, Tally], elapsed: float, clients: int) -> dict[str, object]:
    every = [v for t in tallies.values() for v in t.latencies]
    per_endpoint = {
        path: {
            "requests": len(t.latencies),
            "requests_per_s": round(len(t.latencies) / elapsed, 1),
            "p50_ms": round(percentile(t.latencies, 0.50) * 1000, 2),
            "p99_ms": round(percentile(t.latencies, 0.99) * 1000, 2),
            "errors": t.errors,
        }
        for path, t in tallies.items()
    }
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "requests": len(every),
        "requests_per_s": round(len(every) / elapsed, 1),
        "p50_ms": round(percentile(every, 0.50) * 1000, 2),
        "p99_ms": round(percentile(every, 0.99) * 1000, 2),
        "mean_ms": round(statistics.fmean(every) * 1000, 2) if every else 0.0,
        "errors": sum(t.errors for t in tallies.values()),
        "endpoints": per_endpoint,
        "watched_jobs": len(JOBS),
    }


def main() -> None:
    """Run the load and print the figures, the JSON object last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load lasts")
    parser.add_argument("--clients", type=int, default=100, help="concurrent clients")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between bursts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server, url = start_server(Path(folder) / "runs", args.every)
        try:
            wait_for_reports(url)
            server_cpu, client_cpu = cpu_seconds(server.pid), os.times()
            tallies, elapsed = asyncio.run(load(url, args.clients, args.seconds))
            server_cpu = cpu_seconds(server.pid) - server_cpu
            spent = os.times()
            client_cpu_s = spent.user + spent.system - client_cpu.user - client_cpu.system
        finally:
            server.send_signal(signal.SIGTERM)
            code = server.wait(timeout=60)
    result = figures(tallies, elapsed, args.clients)
    result["server_exit_code"] = code
    result["server_cpu_s"] = round(server_cpu, 2)
    result["client_cpu_s"] = round(client_cpu_s, 2)
    print(f"{args.clients} clients, {result['seconds']} s, {len(JOBS)} jobs watched:")
    for path, row in result["endpoints"].items():  # type: ignore[attr-defined]
        print(
            f"  {path:<20} {row['requests_per_s']:>8} req/s  p50 {row['p50_ms']:>7} ms  "
            f"p99 {row['p99_ms']:>7} ms  errors {row['errors']}"
        )
    print(
        f"  {'all':<20} {result['requests_per_s']:>8} req/s  p50 {result['p50_ms']:>7} ms  "
        f"p99 {result['p99_ms']:>7} ms  errors {result['errors']}; server exit code {code}"
    )
    print(
        f"  CPU seconds: server {server_cpu:.1f} (with its three jobs), clients {client_cpu_s:.1f}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
