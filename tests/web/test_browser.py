"""The dashboard in a real browser: Debian's chromium driven by Playwright against a real
``bpmon serve`` on a free loopback port.

The server watches a tiny job (``live``, a burst every 0.3 s) and serves a runs directory holding
real runs (:mod:`.dashboard_runs`): the lookup chain before and after a change that moved its
bottleneck to a root cause that is not backpressured itself, the hot key's data skew, and, where
ptrace is allowed, a py-spy'd pipeline without a topology file and with one. Each page is opened
at 1,366 px light, 1,366 px dark and 390 px, with no console error allowed, and checked for what
the eye checks: the root-cause box is never filled with the OK colour, the skewed subtask is
marked on the heat map the page opens on, no box overlaps another or is cut off, nothing is wider
than the window. A screenshot of each goes to ``$BPMON_SCREENSHOTS`` when set, else to a folder
of pytest's temporary directory (``pytest-of-USER/pytest-N/screenshots0``): never to the checkout.

Chromium is Debian's (``scripts/setup --test`` installs it), never a browser build Playwright
would download; without it these tests are skipped, except in CI where they must run.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bpmon.model.values import Report

from .dashboard_runs import Chain, copy_runs
from .servers import TOKEN, WAIT_S, tiny, wait_until

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP rebound.test 127.0.0.1",  # a name rebound to this machine
]
SCREENSHOTS_ENV = "BPMON_SCREENSHOTS"
WAIT_MS = WAIT_S * 1000
TAG = re.compile(r"^ROOT CAUSE ·")
"""The tag above a root cause's box."""
VARIANTS = [(1366, "light"), (1366, "dark"), (390, "light")]
OK_FILL = "rgb(46, 125, 50)"
"""The OK level's green (``figures.LEVEL_FILL["OK"]``): never a root cause's fill."""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$BPMON_SCREENSHOTS``, else a folder of pytest's tmp path."""
    named = os.environ.get(SCREENSHOTS_ENV)
    folder = Path(named) if named else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Chromium with a fresh profile (a Playwright persistent context)."""
    if not CHROMIUM.exists():
        reason = "no /usr/bin/chromium: scripts/setup --test installs it (Debian's chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the browser tests", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")),
            executable_path=str(CHROMIUM),
            args=FLAGS,
            headless=True,
        )
        yield context
        context.close()


class Serve:
    """``bpmon serve --port 0 ARGS`` as a child process; its URL is read from its announcement."""

    def __init__(self, bpmon_bin: Path, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(bpmon_bin), "serve", "--port", "0", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **env},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        while True:
            found = re.search(r"serving (https?://\S+)", self.lines.get(timeout=WAIT_S))
            if found:
                self.url = found.group(1)
                break
        self.runs: Path = Path()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def api(self, path: str) -> Any:
        return httpx.get(f"{self.url}{path}", timeout=WAIT_S).json()

    def stop(self) -> None:
        """Stop it as Ctrl-C would; it must exit 0."""
        self.process.terminate()
        assert self.process.wait(timeout=WAIT_S) == 0
        self.reader.join(WAIT_S)
        assert self.process.stderr is not None
        self.process.stderr.close()


@pytest.fixture(scope="module")
def server(
    bpmon_bin: Path,
    tmp_path_factory: pytest.TempPathFactory,
    chain: Chain,
    skew: tuple[Path, Report],
) -> Iterator[Serve]:
    """A real ``bpmon serve`` watching job ``live`` over the chain's and the hot key's runs."""
    folder = tmp_path_factory.mktemp("served")
    copy_runs(chain[0], folder / "runs")
    copy_runs(skew[0], folder / "runs")
    live = folder / "live.toml"
    live.write_text(tiny("live"))
    args = ["--runs-dir", str(folder / "runs"), "--run", str(live), "--every", "0.3"]
    served = Serve(bpmon_bin, args, {})
    served.runs = folder / "runs"
    yield served
    served.stop()


class Page:
    """A page opened at a width and colour scheme, with its console errors collected."""

    def __init__(
        self,
        browser: Any,
        url: str,
        shots: Path,
        width: int = 1366,
        scheme: str = "light",
        ready: bool = True,
    ) -> None:
        self.page = browser.new_page()
        self.page.set_viewport_size({"width": width, "height": 900})
        self.page.emulate_media(color_scheme=scheme)
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.width, self.scheme, self.shots = width, scheme, shots
        if ready:
            self.go(url)
        else:
            self.page.goto(url)

    def go(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready=yes]", state="attached", timeout=WAIT_MS)

    def js(self, code: str, arg: Any = None) -> Any:
        return self.page.evaluate(code, arg)

    def check(self, name: str) -> None:
        """No console error, nothing wider than the window; a full-page screenshot."""
        assert self.errors == [], self.errors
        wide, room = self.js(
            "[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]"
        )
        assert wide <= room, f"{name} at {self.width} px is {wide - room} px wider than the window"
        shot = self.shots / f"{name}-{self.width}-{self.scheme}.png"
        self.page.screenshot(path=str(shot), full_page=True)

    def close(self) -> None:
        self.page.close()


def _each_variant(
    browser: Any, url: str, shots: Path, name: str, check: Callable[[Page], None]
) -> None:
    for width, scheme in VARIANTS:
        page = Page(browser, url, shots, width, scheme)
        try:
            check(page)
            page.check(name)
        finally:
            page.close()


GRAPH = """(id) => {
  const el = document.getElementById(id);
  const area = el.parentElement.getBoundingClientRect();
  const notes = Array.from(el.querySelectorAll('g.annotation')).map((g) => {
    const rect = g.querySelector('rect.bg');
    const lines = Array.from(g.querySelectorAll('tspan.line')).map((t) => t.textContent);
    const b = rect.getBoundingClientRect();
    return {text: lines.length ? lines.join('\\n') : g.textContent,
            fill: getComputedStyle(rect).fill,
            frame: parseFloat(getComputedStyle(rect).strokeWidth),
            box: [b.left, b.top, b.right, b.bottom]};
  });
  return {direction: el.dataset.direction, notes: notes,
          scroll: [el.parentElement.scrollWidth, el.parentElement.clientWidth],
          area: [area.left, area.right]};
}"""


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", css)[:3])


def _apart(a: list[float], b: list[float]) -> bool:
    """True when two rectangles do not overlap (a pixel of slack)."""
    return a[2] <= b[0] + 1 or b[2] <= a[0] + 1 or a[3] <= b[1] + 1 or b[3] <= a[1] + 1


def check_graph(page: Page, report: dict[str, Any], figure: str = "graph") -> dict[str, Any]:
    """The graph as the eye reads it: each vertex's box once, with its level word and its
    parallelism; the root cause starred, framed thick and never filled with the OK colour; no
    two boxes or labels overlapping; everything inside its card, which does not scroll."""
    drawn = page.js(GRAPH, figure)
    cause = report["root_causes"][0] if report["root_causes"] else None
    boxes = {}
    for vertex in report["vertices"]:
        name = vertex["name"]
        mine = [n for n in drawn["notes"] if re.match(rf"(★ )?{re.escape(name)}\n", n["text"])]
        assert len(mine) == 1, (name, drawn["notes"])
        box = boxes[name] = mine[0]
        assert (
            vertex["level"] in box["text"] and f"parallelism {vertex['parallelism']}" in box["text"]
        )
        culprit = cause is not None and name == cause["vertex"]
        assert box["text"].startswith("★") is culprit
        assert box["frame"] == (4 if culprit else 1)
        if culprit:
            red, green, blue = _rgb(box["fill"])
            assert box["fill"] != OK_FILL and red > 2 * green and red > 2 * blue, box
    tags = [n for n in drawn["notes"] if TAG.match(n["text"])]
    assert [t["text"] for t in tags] == ([f"ROOT CAUSE · {cause['kind']}"] if cause else [])
    shown = [n for n in drawn["notes"] if n["text"]]  # boxes, tags, edge labels (not arrows)
    for i, a in enumerate(shown):
        assert all(_apart(a["box"], b["box"]) for b in shown[i + 1 :]), (a, shown)
        assert drawn["area"][0] - 1 <= a["box"][0] and a["box"][2] <= drawn["area"][1] + 1, a
    wide, room = drawn["scroll"]
    assert wide <= room, f"the graph scrolls sideways ({wide} px in {room} px)"
    assert drawn["direction"] == ("across" if page.width > 900 else "down")
    return boxes


TICKS = """(within) =>
  Array.from(document.querySelectorAll(within + ' .xtick text'), (t) => t.textContent)"""
"""The time axis' labels of the figures in ``within``."""
SERIES = """() => ({
  ticks: Array.from(document.querySelectorAll('#series .xtick text')).map((t) => t.textContent),
  runs: Array.from(document.querySelectorAll('#series g.annotation')).map((g) => g.textContent),
  lines: Array.from(document.querySelectorAll('#series-legend li')).map((l) => l.textContent),
})"""


def test_the_root_cause_is_marked_and_never_painted_healthy(
    browser: Any, server: Serve, shots: Path, chain: Chain
) -> None:
    """The chain after the change: its root cause (a slow sink) is not backpressured itself,
    level OK, and was painted the OK green; now it is red (busy), starred, framed and tagged.
    Its two runs (before and after the change) are apart on a real time axis."""
    _, before, after = chain
    latest = server.api("/api/v1/jobs/lookup-chain")["latest"]
    assert latest["root_causes"][0]["vertex"] == "store" and latest["vertices"][-1]["level"] == "OK"

    def check(page: Page) -> None:
        check_graph(page, latest)
        assert page.page.inner_text("#cause-panel .culprit-name") == "store"
        assert page.page.get_attribute("#graph", "data-render-ms") is not None
        assert page.page.locator("tr.vertex.culprit[data-vertex=store]").count() == 1
        series = page.js(SERIES)
        assert series["ticks"] and not [t for t in series["ticks"] if re.search(r"\.\d", t)]
        assert series["runs"] == [f"run …{before.run_id[-4:]}", f"run …{after.run_id[-4:]}"]
        assert series["lines"][-1] == "a new run starts (its id above)"
        if page.scheme == "dark":
            colour = page.js("getComputedStyle(document.body).backgroundColor")
            assert colour == "rgb(17, 20, 24)"

    _each_variant(browser, f"{server.url}/job/lookup-chain", shots, "job", check)


HEAT = """([row, column]) => {
  const el = document.getElementById('heatmap');
  const xa = el._fullLayout.xaxis, ya = el._fullLayout.yaxis;
  const at = el.getBoundingClientRect();
  const box = (e) => {
    const b = e.getBoundingClientRect();
    return [b.left, b.top, b.right, b.bottom];
  };
  return {
    checked: document.querySelector('input[name=heat]:checked').value,
    visible: el._fullData.filter((t) => t.visible === true).map((t) => t.name),
    cell: [at.left + xa._offset + xa.l2p(column), at.top + ya._offset + ya.l2p(row)],
    frames: Array.from(el.querySelectorAll('.shapelayer path')).map(box),
    stars: Array.from(el.querySelectorAll('text')).filter((t) => t.textContent.includes('★'))
      .map((t) => [t.textContent, box(t)]),
  };
}"""


def _inside(point: list[float], box: list[float]) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


def test_data_skew_opens_on_busy_share_with_the_hot_subtask_marked(
    browser: Any, server: Serve, shots: Path, skew: tuple[Path, Report]
) -> None:
    """The hot key: the backpressure ratio of aggregate is 0.00 in every subtask, so the heat
    map opens on busy share, where aggregate[0] is framed and starred."""
    _, report = skew
    latest = server.api("/api/v1/jobs/hot-customer")["latest"]
    figure = server.api("/job/hot-customer/live.json")["heatmap"]
    row = figure["layout"]["meta"]["vertices"].index("aggregate")

    def check(page: Page) -> None:
        check_graph(page, latest)
        heat = page.js(HEAT, [row, 0])
        assert (heat["checked"], heat["visible"]) == ("1", ["busy"])
        assert [f for f in heat["frames"] if _inside(heat["cell"], f)], heat
        starred = [t for t, b in heat["stars"] if _inside(heat["cell"], b)]
        assert len(starred) == 1 and starred[0].startswith("★ "), heat

    assert report.root_causes and report.root_causes[0].subtasks == (0,)
    _each_variant(browser, f"{server.url}/job/hot-customer", shots, "job-skew", check)


def test_the_run_page_shows_the_graph_and_marks_the_root_cause_row(
    browser: Any, server: Serve, shots: Path, skew: tuple[Path, Report]
) -> None:
    _, report = skew
    latest = server.api(f"/api/v1/runs/{report.run_id}")

    def check(page: Page) -> None:
        check_graph(page, latest)
        assert page.page.locator("tr.vertex.culprit").count() == 1
        assert page.page.get_attribute("tr.vertex.culprit", "data-vertex") == "aggregate"
        named = page.page.locator("tr.subtask.named th").all_inner_texts()
        assert [t[:4] for t in named] == ["[0]★"]
        assert page.page.get_attribute("tr.subtask.named", "data-vertex") == "aggregate"

    _each_variant(browser, f"{server.url}/run/{report.run_id}", shots, "run", check)


def test_a_pyspy_target_without_a_topology_reads_left_to_right(
    browser: Any, server: Serve, shots: Path, pyspy: tuple[Path, Report, Report]
) -> None:
    """No topology: the stages side by side, the backpressured producer first, not stacked
    consumer above producer; with one (etl): the series list only the lines py-spy gives."""
    runs, bare, etl = pyspy
    copy_runs(runs, server.runs)
    wait_until(
        lambda: {bare.job, etl.job} <= {j["job"] for j in server.api("/api/v1/jobs")["jobs"]},
        "the server to find the py-spy runs",
    )
    latest = server.api(f"/api/v1/jobs/{bare.job}")["latest"]

    def check(page: Page) -> None:
        boxes = check_graph(page, latest)
        middles = {n: ((b["box"][0] + b["box"][2]) / 2, b["box"][1]) for n, b in boxes.items()}
        along = 0 if page.width > 900 else 1  # across: one row; down: one column
        assert (
            max(m[1 - along] for m in middles.values())
            - min(m[1 - along] for m in middles.values())
            < 2
        )
        # the backpressured producers before the busy consumer, the idle main thread last
        order = sorted(middles, key=lambda n: middles[n][along])
        assert {order[0], order[1]} == {"ingest", "transform"}, order
        assert order[2:] == ["upload", "MainThread"], order
        assert "no topology" in page.page.inner_text(".graph-legend .unconnected")

    _each_variant(browser, f"{server.url}/job/{bare.job}", shots, "job-pyspy", check)
    page = Page(browser, f"{server.url}/job/{etl.job}", shots)
    try:
        assert page.js(SERIES)["lines"] == ["backpressure ratio", "busy", "idle"]
        assert page.js("document.getElementById('series').data.length") == 3
        check_graph(page, server.api(f"/api/v1/jobs/{etl.job}")["latest"])
        page.check("job-pyspy-topology")
    finally:
        page.close()


def test_a_new_burst_arrives_over_the_event_stream_and_the_page_updates_in_place(
    browser: Any, server: Serve, shots: Path
) -> None:
    page = Page(browser, f"{server.url}/job/live", shots)
    try:
        page.page.wait_for_function("document.body.dataset.stream === 'open'", timeout=WAIT_MS)
        first = page.js("window.kept = 'this page'; document.body.dataset.latest")
        page.page.wait_for_function(
            "(first) => Number(document.body.dataset.updates || 0) >= 1 && "
            "document.body.dataset.latest !== first",
            arg=first,
            timeout=WAIT_MS,
        )
        assert page.js("window.kept") == "this page"  # redrawn in place, never reloaded
        # Both read at one instant: a burst lands every 0.3 s and redraws them together.
        now, shown = page.js(
            "[document.body.dataset.latest, document.getElementById('latest').innerText]"
        )
        burst = now.rsplit("/", 1)[1]
        assert f"burst {burst} of run" in shown
        names = {n["text"].split()[0] for n in page.js(GRAPH, "graph")["notes"] if n["text"]}
        assert {"src", "out"} <= names
        page.check("job-live")
    finally:
        page.close()


def test_compare_shows_the_bottleneck_that_moved(browser: Any, server: Serve, shots: Path) -> None:
    def check(page: Page) -> None:
        moved = page.page.inner_text("li[data-kind=moved-bottleneck]")
        assert moved.startswith("the bottleneck moved from geo-lookup (slow-operator")
        assert "to store (slow-sink" in moved
        for side, vertex in (("before", "geo-lookup"), ("after", "store")):
            tags = page.page.locator(f"#graph-{side} g.annotation", has_text=TAG)
            assert tags.count() == 1
            assert vertex in page.page.inner_text(f"#{side} .side-cause")

    _each_variant(browser, f"{server.url}/compare?job=lookup-chain", shots, "compare", check)


def test_history_draws_a_trend_per_job_on_a_scale_of_seconds(
    browser: Any, server: Serve, shots: Path
) -> None:
    def check(page: Page) -> None:
        assert page.page.locator(".figure .main-svg").count() >= 3  # a trend per job
        ticks = page.js(TICKS, ".figure")
        assert ticks and not [t for t in ticks if re.search(r"\.\d", t)], ticks

    _each_variant(browser, f"{server.url}/history", shots, "history", check)


def test_the_jobs_page_runs_a_shipped_example_and_lists_it_running(
    browser: Any, server: Serve, shots: Path
) -> None:
    def listed(page: Page) -> None:
        assert page.page.locator("tr[data-job=live] [data-state=running]").count() == 1
        assert page.page.locator("tr[data-job=lookup-chain] [data-state=stored]").count() == 1

    _each_variant(browser, f"{server.url}/", shots, "jobs", listed)
    page = Page(browser, f"{server.url}/", shots)
    try:
        page.page.select_option("#example", "healthy")
        page.page.click("#start-example button")
        page.page.wait_for_url(re.compile(r"/job/healthy-filter$"), timeout=WAIT_MS)
        page.page.wait_for_selector("body[data-ready=yes]", state="attached", timeout=WAIT_MS)
        page.check("job-waiting")  # the job has no report yet, or its first one
        page.go(f"{server.url}/")
        assert page.page.locator("tr[data-job=healthy-filter] [data-state=running]").count() == 1
        page.go(f"{server.url}/job/healthy-filter")
        page.page.click("#stop-job")
        page.page.wait_for_function("document.body.dataset.state === 'ended'", timeout=WAIT_MS)
        assert page.errors == []
    finally:
        page.close()


def test_every_page_is_usable_from_the_keyboard(browser: Any, server: Serve, shots: Path) -> None:
    page = Page(browser, f"{server.url}/job/lookup-chain", shots)
    try:
        reached = []
        for _ in range(12):
            page.page.keyboard.press("Tab")
            reached.append(
                page.js("document.activeElement.id || document.activeElement.textContent")
            )
        assert "Skip to content" in reached and "series-vertex" in reached
        page.page.focus("#series-vertex")
        page.page.keyboard.press("ArrowDown")
        page.page.wait_for_function(
            "document.getElementById('series').dataset.vertex === "
            "document.getElementById('series-vertex').value",
            timeout=WAIT_MS,
        )
        # narrowed to a phone's width, the graph turns top to bottom rather than scroll
        page.page.set_viewport_size({"width": 390, "height": 900})
        page.page.wait_for_function(
            "document.getElementById('graph').dataset.direction === 'down'", timeout=WAIT_MS
        )
        wide, room = page.js(GRAPH, "graph")["scroll"]
        assert wide <= room
        assert page.errors == []
    finally:
        page.close()


def test_with_a_token_the_browser_signs_in_once(
    browser: Any, bpmon_bin: Path, tmp_path: Path, shots: Path
) -> None:
    served = Serve(bpmon_bin, ["--runs-dir", str(tmp_path / "runs")], {"BPMON_TOKEN": TOKEN})
    page = Page(browser, f"{served.url}/", shots, ready=False)
    try:
        assert page.page.url == f"{served.url}/login?next=/"
        page.page.fill("#token", TOKEN)
        page.page.keyboard.press("Enter")
        page.page.wait_for_selector("body[data-page=jobs][data-ready=yes]", timeout=WAIT_MS)
        assert page.page.url == f"{served.url}/"
        page.check("signed-in")
    finally:
        page.close()
        shutil.rmtree(tmp_path / "runs", ignore_errors=True)
        served.stop()


def test_the_api_docs_render_with_every_other_address_blocked(
    browser: Any, server: Serve, shots: Path
) -> None:
    """Swagger UI and ReDoc come from this server: with the network to anything else cut, both
    draw every operation, and Swagger UI runs one."""
    document = httpx.get(f"{server.url}/openapi.json", timeout=WAIT_S).json()
    operations = sum(len(methods) for methods in document["paths"].values())
    for path, operation in (("/docs", ".opblock"), ("/redoc", "[data-section-id^='operation/']")):
        page = browser.new_page()
        elsewhere: list[str] = []
        errors: list[str] = []
        page.on("console", lambda m, errors=errors: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))

        def only_this_server(route: Any, elsewhere: list[str] = elsewhere) -> None:
            if route.request.url.startswith(f"{server.url}/"):
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        page.route("**/*", only_this_server)
        try:
            page.goto(f"{server.url}{path}")
            page.wait_for_selector(operation, timeout=WAIT_MS)
            assert page.locator(operation).count() == operations
            assert "Start watching a shipped example scenario" in page.inner_text("body")
            if path == "/docs":
                page.click("text=/healthz")
                page.click("button:has-text('Try it out')")
                page.click("button:has-text('Execute')")
                status = page.locator(".live-responses-table .response .response-col_status")
                status.first.wait_for(timeout=WAIT_MS)
                assert status.first.inner_text().strip() == "200"
            page.screenshot(path=str(shots / f"api{path.replace('/', '-')}.png"))
            assert elsewhere == []
            # The page's policy refuses what ReDoc would fetch from its CDN (its footer logo).
            assert all("Content Security Policy" in e for e in errors), errors
        finally:
            page.close()


def test_a_page_of_a_rebound_name_gets_nothing(browser: Any, server: Serve) -> None:
    """DNS rebinding: the browser resolves rebound.test to this machine, and bpmon refuses."""
    port = server.url.rsplit(":", 1)[1]
    page = browser.new_page()
    try:
        answer = page.goto(f"http://rebound.test:{port}/api/v1/jobs")
        assert answer is not None and answer.status == 421
        assert "--allow-host" in page.inner_text("body")
        assert "lookup-chain" not in page.content()
    finally:
        page.close()


AUTOSCALER = """(within) => {
  const card = document.querySelector(within);
  const box = card.querySelector('.autoscaler-opinion');
  if (!box) return null;
  const rect = (e) => {
    const b = e.getBoundingClientRect();
    return [b.left, b.top, b.right, b.bottom];
  };
  const badge = box.querySelector('.verdict');
  return {
    count: card.querySelectorAll('.autoscaler-opinion').length,
    vertex: box.dataset.vertex, verdict: box.dataset.verdict,
    line: box.querySelector('.autoscaler-line').innerText,
    detail: box.querySelector('.autoscaler-detail').innerText,
    box: rect(box), card: rect(card),
    advice: rect(card.querySelector('.recommendation')),
    badge: [getComputedStyle(badge).color, getComputedStyle(card).backgroundColor],
  };
}"""
"""The autoscaler's opinion in the root-cause card ``within``, as the eye sees it."""


def test_the_autoscalers_opinion_shows_under_the_recommendation(
    browser: Any, server: Serve, shots: Path, skew: tuple[Path, Report]
) -> None:
    """The hot key: under bpmon's recommendation to spread the key, what Flink's autoscaler
    would do to aggregate (scale it up) and its verdict, scales-ineffectively, with why; inside
    the card at every width and in both schemes, its verdict legible on the card, on the Job page
    and on the Run page. The figures are the report's own, as the API serves it."""
    _, report = skew
    latest = server.api("/api/v1/jobs/hot-customer")["latest"]
    verdict = next(v for v in latest["autoscaler"]["verdicts"] if v["vertex"] == "aggregate")
    row = next(v for v in latest["autoscaler"]["vertices"] if v["name"] == "aggregate")
    assert verdict["verdict"] == "scales-ineffectively", latest["autoscaler"]["verdicts"]
    move = f"{row['parallelism']} → {row['recommended_parallelism']}"

    def seen(within: str) -> Callable[[Page], None]:
        def check(page: Page) -> None:
            shown = page.js(AUTOSCALER, within)
            assert shown is not None, f"no autoscaler opinion in {within}"
            assert shown["count"] == 1 and (shown["vertex"], shown["verdict"]) == (
                "aggregate",
                "scales-ineffectively",
            )
            assert shown["line"] == f"Flink's autoscaler would: {move} scales-ineffectively"
            assert shown["detail"] == verdict["detail"]
            box, card, advice = shown["box"], shown["card"], shown["advice"]
            assert advice[3] <= box[1] + 1, "the opinion is not under the recommendation"
            assert card[0] <= box[0] and box[2] <= card[2] + 1, (box, card)
            assert box[2] - box[0] > 0 and box[3] - box[1] > 0
            colour, background = shown["badge"]
            assert _rgb(colour) != _rgb(background), shown["badge"]

        return check

    _each_variant(
        browser, f"{server.url}/job/hot-customer", shots, "job-autoscaler", seen("#cause-panel")
    )
    run = f"{server.url}/run/{report.run_id}"
    _each_variant(browser, run, shots, "run-autoscaler", seen("section.cause-card"))
