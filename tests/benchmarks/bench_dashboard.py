"""The Job page of the dashboard for jobs of 5, 50 and 200 vertices: server render time and payload,
against plotly's default way of serving a figure.

bpmon renders the page on the server with its figures as JSON (plain dicts in plotly's schema,
:mod:`bpmon.web.figures`), and the browser draws them with plotly.js, which it fetches once and
keeps (a versioned, ``immutable`` URL; 4.8 MB, 1.4 MB gzipped). plotly's default is
``fig.to_html(include_plotlyjs=True)``: figures built as ``plotly.graph_objects.Figure``
(validated property by property) and the whole of plotly.js inlined in every answer. Both are
measured on the same reports:

- ``bpmon page``: ``GET /job/{job}`` from a real uvicorn on loopback, wall time (median and p95
  over the rounds), the bytes sent and gzipped; the job has ``--bursts`` stored bursts, whose
  reports the page's series read (from disk on the first request, from memory after).
- ``plotly default``: the page's three figures (graph, heat map, series) built as
  ``go.Figure``, the graph rendered by ``to_html(include_plotlyjs=True)``, the others as divs
  (``include_plotlyjs=False``): what a page costs done that way, per request.
- ``browser graph``: when Debian's chromium is there, the milliseconds plotly.js takes to draw the
  graph in it (``data-render-ms`` on the figure; goal: under 1,000 ms for 50 vertices x 8
  subtasks).

Every vertex has ``--parallelism`` subtasks. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_dashboard.py [--rounds 20] [--bursts 30]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import plotly.graph_objects as go

from bpmon.service import facade
from bpmon.service.reports import StoredBurst
from bpmon.service.watching import Watches
from bpmon.web import charts, figures, graph
from bpmon.web.app import create_app
from bpmon.web.server import bind, make_server, url_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))
from test_pages_figures import synthetic  # the tests' synthetic job

SIZES = (5, 50, 200)
GRAPH_GOAL_MS = 1000.0


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": round(statistics.median(ordered), 2), "p95_ms": round(p95, 2)}


def _store(runs: Path, vertices: int, parallelism: int, bursts: int) -> None:
    settings = facade.Settings(runs_dir=runs)
    store = settings.store()
    for burst in range(bursts):
        report = synthetic(vertices, parallelism, seed=burst, burst=burst)
        store.save(report, burst=burst)


def _baseline(report: Any, points: list[StoredBurst]) -> bytes:
    """The same figures the plotly way: graph_objects, plotly.js inlined in the answer."""
    data = charts.series_data(points)
    drawn = go.Figure(graph.job_graph(report))
    heat = go.Figure(figures.heat_map(report))
    series = go.Figure(charts.series_figure(data, report.vertices[0].name))
    parts = [
        drawn.to_html(include_plotlyjs=True),
        heat.to_html(include_plotlyjs=False, full_html=False),
        series.to_html(include_plotlyjs=False, full_html=False),
    ]
    return "".join(parts).encode()


def _browser_graph_ms(url: str) -> float | None:
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        return None
    from playwright.sync_api import sync_playwright

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
    flags += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=str(chromium), args=flags, headless=True
        )
        page = context.new_page()
        page.set_viewport_size({"width": 1366, "height": 900})
        times = []
        for _ in range(3):  # the first load also compiles plotly.js
            page.goto(url)
            page.wait_for_selector("body[data-ready=yes]", state="attached", timeout=120_000)
            times.append(float(page.get_attribute("#graph", "data-render-ms") or "nan"))
        context.close()
    return round(min(times[1:]), 1)


def measure(vertices: int, parallelism: int, bursts: int, rounds: int) -> dict[str, Any]:
    """Both ways for one job size."""
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs"
        _store(runs, vertices, parallelism, bursts)
        watches = Watches(facade.Settings(runs_dir=runs), every_s=None)
        sock = bind("127.0.0.1", 0)
        server = make_server(create_app(watches), watches)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        url = f"{url_of(sock)}/job/big"
        try:
            with httpx.Client(timeout=120) as client:
                first = client.get(url)
                assert first.status_code == 200, first.text[:200]
                page_ms = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    body = client.get(url).content
                    page_ms.append((time.perf_counter() - started) * 1000)
            browser_ms = _browser_graph_ms(url) if vertices == 50 else None
        finally:
            server.should_exit = True
            thread.join(60)
            sock.close()
        reports = [synthetic(vertices, parallelism, seed=b, burst=b) for b in range(bursts)]
        points = [StoredBurst("run-a", b, r) for b, r in enumerate(reports)]
        base_ms, base = [], b""
        for _ in range(max(3, rounds // 4)):
            started = time.perf_counter()
            base = _baseline(reports[-1], points)
            base_ms.append((time.perf_counter() - started) * 1000)
    return {
        "vertices": vertices,
        "subtasks": vertices * parallelism,
        "page": {**_summary(page_ms), "bytes": len(body), "gzip_bytes": len(gzip.compress(body))},
        "plotly_default": {
            **_summary(base_ms),
            "bytes": len(base),
            "gzip_bytes": len(gzip.compress(base)),
        },
        "browser_graph_ms": browser_ms,
    }


def main() -> None:
    """Measure every size, print a table, then the JSON figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--bursts", type=int, default=30)
    parser.add_argument("--parallelism", type=int, default=8)
    args = parser.parse_args()
    results = [measure(n, args.parallelism, args.bursts, args.rounds) for n in SIZES]
    print(f"{'vertices':>8} {'way':<15} {'median ms':>10} {'p95 ms':>8} {'bytes':>10} {'gzip':>10}")
    for r in results:
        for way, key in (("bpmon page", "page"), ("plotly default", "plotly_default")):
            f = r[key]
            print(
                f"{r['vertices']:>8} {way:<15} {f['median_ms']:>10.1f} {f['p95_ms']:>8.1f} "
                f"{f['bytes']:>10,} {f['gzip_bytes']:>10,}"
            )
    drawn = next((r["browser_graph_ms"] for r in results if r["browser_graph_ms"]), None)
    if drawn is not None:
        verdict = "met" if drawn < GRAPH_GOAL_MS else "NOT met"
        print(f"graph of 50 vertices x {args.parallelism} drawn in chromium in {drawn} ms "
              f"(goal < {GRAPH_GOAL_MS:.0f} ms: {verdict})")  # fmt: skip
    print(json.dumps({"bursts": args.bursts, "rounds": args.rounds, "results": results}))


if __name__ == "__main__":
    main()
