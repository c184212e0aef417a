"""The dashboard in a real browser: Debian's chromium driven by Playwright against a real
``bpmon serve`` on a free loopback port.

The server watches a tiny job (``live``, a burst every 0.3 s) and serves a runs directory holding
the lookup chain before and after a change that moved its bottleneck. Every page is opened at
1,366 and 390 pixels wide, light and dark, with no console error allowed; screenshots go to
``test-artefacts/dashboard/`` (git-ignored) for a person to look at.

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

from .dashboard_runs import moved_bottleneck_runs
from .servers import TOKEN, WAIT_S, tiny

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
ARTEFACTS = Path(__file__).resolve().parents[2] / "test-artefacts" / "dashboard"
WAIT_MS = WAIT_S * 1000
TAG = re.compile(r"^ROOT CAUSE ·")
"""The tag above a root cause's box (its box says "root cause" in lower case)."""
SIZES = [(1366, "light"), (390, "light"), (1366, "dark"), (390, "dark")]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Chromium with a fresh profile (a Playwright persistent context)."""
    if not CHROMIUM.exists():
        reason = "no /usr/bin/chromium: scripts/setup --test installs it (Debian's chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the browser tests", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    ARTEFACTS.mkdir(parents=True, exist_ok=True)
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

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def stop(self) -> None:
        """Stop it as Ctrl-C would; it must exit 0."""
        self.process.terminate()
        assert self.process.wait(timeout=WAIT_S) == 0
        self.reader.join(WAIT_S)
        assert self.process.stderr is not None
        self.process.stderr.close()


@pytest.fixture(scope="module")
def server(bpmon_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """A real ``bpmon serve`` watching job ``live`` over the lookup chain's two runs."""
    folder = tmp_path_factory.mktemp("served")
    moved_bottleneck_runs(folder / "runs", folder)
    live = folder / "live.toml"
    live.write_text(tiny("live"))
    args = ["--runs-dir", str(folder / "runs"), "--run", str(live), "--every", "0.3"]
    served = Serve(bpmon_bin, args, {})
    yield served
    served.stop()


class Page:
    """A page opened at a width and colour scheme, with its console errors collected."""

    def __init__(
        self, browser: Any, url: str, width: int = 1366, scheme: str = "light", ready: bool = True
    ) -> None:
        self.page = browser.new_page()
        self.page.set_viewport_size({"width": width, "height": 900})
        self.page.emulate_media(color_scheme=scheme)
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.width, self.scheme = width, scheme
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
        overflow = self.js("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} at {self.width} px is {overflow} px wider than the window"
        shot = ARTEFACTS / f"{name}-{self.width}-{self.scheme}.png"
        self.page.screenshot(path=str(shot), full_page=True)

    def close(self) -> None:
        self.page.close()


GRAPH_BOXES = """() => Array.from(document.querySelectorAll('#graph g.annotation')).map((g) => {
  const rect = g.querySelector('rect.bg');
  const lines = Array.from(g.querySelectorAll('tspan.line')).map((t) => t.textContent);
  return {text: lines.length ? lines.join('\\n') : g.textContent,
          frame: rect ? rect.getAttribute('stroke-width') ||
          getComputedStyle(rect).strokeWidth : null};
})"""


def _each_size(browser: Any, url: str, name: str, check: Callable[[Page], None]) -> None:
    for width, scheme in SIZES:
        page = Page(browser, url, width, scheme)
        try:
            check(page)
            page.check(name)
        finally:
            page.close()


def test_the_job_page_graph_shows_every_vertex_its_level_word_and_the_root_cause(
    browser: Any, server: Serve
) -> None:
    job = httpx.get(f"{server.url}/api/v1/jobs/lookup-chain", timeout=WAIT_S).json()
    latest = job["latest"]
    culprit = latest["root_causes"][0]

    def check(page: Page) -> None:
        boxes = page.js(GRAPH_BOXES)
        for vertex in latest["vertices"]:
            mine = [b for b in boxes if re.match(rf"(★ )?{re.escape(vertex['name'])}\n", b["text"])]
            assert len(mine) == 1, (vertex["name"], boxes)
            assert vertex["level"] in mine[0]["text"]
            framed = vertex["name"] == culprit["vertex"]
            assert mine[0]["text"].startswith("★") is framed
            assert float(str(mine[0]["frame"]).removesuffix("px")) == (4 if framed else 1)
        tags = [b["text"] for b in boxes if b["text"].startswith("ROOT CAUSE")]
        assert tags == [f"ROOT CAUSE · {culprit['kind']}"]
        assert page.page.inner_text("#cause-panel .culprit-name") == culprit["vertex"]
        assert page.page.get_attribute("#graph", "data-render-ms") is not None
        if page.scheme == "dark":
            colour = page.js("getComputedStyle(document.body).backgroundColor")
            assert colour == "rgb(17, 20, 24)"

    _each_size(browser, f"{server.url}/job/lookup-chain", "job", check)


def test_a_new_burst_arrives_over_the_event_stream_and_the_page_updates_in_place(
    browser: Any, server: Serve
) -> None:
    page = Page(browser, f"{server.url}/job/live")
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
        names = {b["text"].split()[0] for b in page.js(GRAPH_BOXES) if b["text"]}
        assert {"src", "out"} <= names
        page.check("job-live")
    finally:
        page.close()


def test_compare_shows_the_bottleneck_that_moved(browser: Any, server: Serve) -> None:
    def check(page: Page) -> None:
        moved = page.page.inner_text("li[data-kind=moved-bottleneck]")
        assert moved.startswith("the bottleneck moved from geo-lookup (slow-operator")
        assert "to store (slow-sink" in moved
        for side, vertex in (("before", "geo-lookup"), ("after", "store")):
            tags = page.page.locator(f"#graph-{side} g.annotation", has_text=TAG)
            assert tags.count() == 1
            assert vertex in page.page.inner_text(f"#{side} .side-cause")

    _each_size(browser, f"{server.url}/compare?job=lookup-chain", "compare", check)


def test_the_jobs_page_runs_a_shipped_example_and_lists_it_running(
    browser: Any, server: Serve
) -> None:
    page = Page(browser, f"{server.url}/")
    try:
        assert page.page.locator("tr[data-job=live] [data-state=running]").count() == 1
        assert page.page.locator("tr[data-job=lookup-chain] [data-state=stored]").count() == 1
        page.check("jobs")
        page.page.select_option("#example", "healthy")
        page.page.click("#start-example button")
        page.page.wait_for_url(re.compile(r"/job/healthy-filter$"), timeout=WAIT_MS)
        page.page.wait_for_selector("body[data-ready=yes]", state="attached", timeout=WAIT_MS)
        page.check("job-waiting")  # the job has no report yet, or its first one
        page.go(f"{server.url}/")
        assert page.page.locator("tr[data-job=healthy-filter] [data-state=running]").count() == 1
        page.check("jobs-running")
        page.go(f"{server.url}/job/healthy-filter")
        page.page.click("#stop-job")
        page.page.wait_for_function("document.body.dataset.state === 'ended'", timeout=WAIT_MS)
        assert page.errors == []
    finally:
        page.close()


def test_every_page_is_usable_from_the_keyboard(browser: Any, server: Serve) -> None:
    page = Page(browser, f"{server.url}/job/lookup-chain")
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
        assert page.errors == []
    finally:
        page.close()


def test_history_and_run_pages_draw_at_every_size(browser: Any, server: Serve) -> None:
    runs = httpx.get(f"{server.url}/api/v1/runs?job=lookup-chain", timeout=WAIT_S).json()["runs"]

    def history(page: Page) -> None:
        assert page.page.locator(".figure .main-svg").count() >= 2  # a trend per job

    def run(page: Page) -> None:
        assert page.page.locator("table.vertices tr.vertex").count() == 4
        assert page.page.locator("#graph g.annotation", has_text=TAG).count() == 1

    _each_size(browser, f"{server.url}/history", "history", history)
    _each_size(browser, f"{server.url}/run/{runs[-1]['run_id']}", "run", run)


def test_with_a_token_the_browser_signs_in_once(
    browser: Any, bpmon_bin: Path, tmp_path: Path
) -> None:
    served = Serve(bpmon_bin, ["--runs-dir", str(tmp_path / "runs")], {"BPMON_TOKEN": TOKEN})
    page = Page(browser, f"{served.url}/", ready=False)
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


def test_the_api_docs_render_with_every_other_address_blocked(browser: Any, server: Serve) -> None:
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
            page.screenshot(path=str(ARTEFACTS / f"api{path.replace('/', '-')}.png"))
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
