"""The Job page's checkpoint panel, on the reports of real runs, through a real uvicorn and in
Debian's chromium.

The runs (:func:`.dashboard_runs.checkpoint_runs`, once a session): the shipped
``checkpoint-timeouts``, whose aligned checkpoints fail behind the backpressure of ``enrich``
(a ``checkpoint-backpressure`` finding), ``healthy`` (quick checkpoints, no finding) and the
tiny job ``plain`` (no checkpoints). Every figure the panel shows is checked against the
report's own fields as the API serves them, never against what the code under test computes;
a checkpoint slow for its own reasons is made of a window the rules themselves judge.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

from bpmon.model.checkpoints import (
    Checkpoint,
    CheckpointWindow,
    SubtaskCheckpoint,
    VertexCheckpoint,
)
from bpmon.model.numbers import milliseconds
from bpmon.model.values import (
    Metrics,
    Report,
    RootCause,
    SubtaskStatus,
    TargetSettings,
    VertexStatus,
    Window,
)
from bpmon.rules.checkpoints import checkpoint_findings, checkpoint_report
from bpmon.rules.config import CheckpointRules
from bpmon.scenario import load_example
from bpmon.service import facade
from bpmon.service.reports import StoredBurst
from bpmon.service.stored import StoredJobs
from bpmon.service.watching import Watches
from bpmon.web import checkpoints

from .dashboard_runs import CHECKPOINTED, Checkpointed
from .servers import WAIT_S, ServeFactory
from .test_browser import VARIANTS, Page, browser, shots  # noqa: F401 (fixtures)

HELD = "checkpoint-timeouts"
QUICK = "healthy-filter"
PHASE_KEYS = ("start_delay_ms", "alignment_ms", "sync_ms", "async_ms")


@pytest.fixture
def cp_watches(checkpointed: Checkpointed, tmp_path: Path) -> Watches:
    """A registry over a copy of the checkpointed runs (a test may add runs to it)."""
    runs = tmp_path / "runs"
    shutil.copytree(checkpointed[0], runs)
    settings = facade.Settings(runs_dir=runs)
    return Watches(settings, every_s=None, stored=StoredJobs(settings, ttl_s=0))


def _panel(page: str) -> str:
    """The checkpoint panel of a page (an error when there is none)."""
    found = re.search(r'<section class="card checkpoint-card[^"]*".*?</section>', page, re.S)
    assert found is not None, "no checkpoint panel"
    return found.group(0)


def _figure(page: str, name: str) -> dict[str, Any]:
    found = re.search(rf'<script type="application/json" id="{name}-json">(.*?)</script>', page)
    assert found is not None, f"no {name} figure"
    figure: dict[str, Any] = json.loads(found.group(1))
    return figure


def _fact(panel: str, name: str) -> str | None:
    found = re.search(rf'<dd data-fact="{name}"[^>]*>(.*?)</dd>', panel)
    return None if found is None else html.unescape(found.group(1))


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _bursts(client: Any, job: str) -> list[tuple[str, int, dict[str, Any]]]:
    """Every stored burst of ``job`` as the API serves it, oldest first: run, burst, report."""
    out = []
    runs = client.get(f"/api/v1/runs?job={job}").json()["runs"]
    for run in sorted(runs, key=lambda r: r["start"]):
        for burst in range(run["bursts"]):
            report = client.get(f"/api/v1/runs/{run['run_id']}?burst={burst}").json()
            out.append((run["run_id"], burst, report))
    return out


@pytest.mark.slow
def test_a_checkpoint_held_by_backpressure_is_tied_to_the_root_cause(
    serve: ServeFactory, cp_watches: Watches
) -> None:
    client = serve(cp_watches).client
    latest = client.get(f"/api/v1/jobs/{HELD}").json()["latest"]
    held = [f for f in latest["findings"] if f["kind"] == "checkpoint-backpressure"]
    assert latest["root_causes"], latest["findings"]
    cause = latest["root_causes"][0]
    assert len(held) == 1 and held[0]["vertex"] == cause["vertex"] == "enrich", latest["findings"]
    page = client.get(f"/job/{HELD}").text
    panel = _panel(page)
    assert 'class="card checkpoint-card held"' in panel
    _assert_tie(page, panel, latest, held[0])
    _assert_facts(panel, latest["checkpoints"])
    _assert_phases(page, panel, latest["checkpoints"])
    durations = _figure(page, "checkpoint-durations")
    _assert_durations(durations, _bursts(client, HELD), dict(CHECKPOINTED)["checkpoint-timeouts"])
    live = client.get(f"/job/{HELD}/live.json").json()
    assert live["checkpoints"] == panel
    assert live["checkpoint_figures"] == {
        "checkpoint-durations": durations,
        "checkpoint-phases": _figure(page, "checkpoint-phases"),
    }
    for figure in live["checkpoint_figures"].values():
        go.Figure(figure)


def _share(last: dict[str, Any]) -> str:
    """The waiting share of a report's newest checkpoint as a whole percentage."""
    return f"{min(last['barrier_wait_ms'] / last['duration_ms'], 1.0):.0%}"


def _assert_tie(page: str, panel: str, latest: dict[str, Any], held: dict[str, Any]) -> None:
    """The waiting share of the newest checkpoint, a link to the root cause on the page, the
    finding's remedies in its order, nothing left out."""
    last, cause = latest["checkpoints"]["last"], latest["root_causes"][0]
    tie = re.search(r'<p class="checkpoint-tie">(.*?)</p>', panel)
    assert tie is not None
    assert tie.group(1) == (
        f"{_share(last)} of checkpoint {last['id']} was barriers waiting behind the "
        f'backpressure from <a class="cause-link" href="#root-cause-1">{cause["vertex"]}</a>, '
        f"the root cause ({cause['kind']})"
    )
    target = re.search(r'<p class="cause-title" data-rank="1" id="root-cause-1">(.*?)</p>', page)
    assert target is not None and f"<b>{cause['vertex']}</b>" in target.group(1)
    shown = [html.unescape(r) for r in re.findall(r"<li>(.*?)</li>", panel)]
    listed = held["detail"].split("remedies, in order: ", 1)[1]
    assert "; ".join(shown) == listed and len(shown) >= 2
    assert shown[0] == "fix the bottleneck first: " + cause["recommendation"].rstrip(".")


def _assert_facts(panel: str, cp: dict[str, Any]) -> None:
    """The report's newest checkpoint, its failure, the counts and the mode."""
    last = cp["last"]
    ended = "failed after" if last["status"] == "failed" else "completed in"
    newest = f"checkpoint {last['id']} {ended} {last['duration_ms']:,.0f} ms"
    assert _fact(panel, "newest") == newest
    assert _fact(panel, "failure") == (last["failure"] if last["status"] == "failed" else None)
    assert _fact(panel, "counts") == f"{cp['completed']:,} completed, {cp['failed']:,} failed"
    waiting = _fact(panel, "waiting")
    assert waiting is not None and waiting.startswith(f"{_share(last)} of it (")
    assert f"({last['barrier_wait_ms']:,.0f} ms" in waiting
    assert _fact(panel, "mode") == f"{cp['mode']}, every {cp['interval_ms']:,.0f} ms"


def _assert_phases(page: str, panel: str, cp: dict[str, Any]) -> None:
    """The table and the stacked bars are the report's vertices, the duration marked."""
    rows = re.findall(r'<tr data-vertex="([^"]+)"[^>]*><th scope="row">[^<]*</th>(.*?)</tr>', panel)
    assert [name for name, _ in rows] == [v["name"] for v in cp["vertices"]]
    for (_, cells), vertex in zip(rows, cp["vertices"], strict=True):
        expected = [milliseconds(vertex[k]) for k in PHASE_KEYS]
        expected.append(f"{vertex['acknowledged']}/{vertex['parallelism']}")
        assert re.findall(r'<td class="num">([^<]*)</td>', cells) == expected
    phases = _figure(page, "checkpoint-phases")
    assert [t["meta"] for t in phases["data"]] == list(PHASE_KEYS)
    for trace in phases["data"]:
        assert trace["y"] == [v["name"] for v in cp["vertices"]]
        assert trace["x"] == [_ms(v[trace["meta"]]) for v in cp["vertices"]]
    assert [s["x0"] for s in phases["layout"]["shapes"]] == [_ms(cp["last"]["duration_ms"])]
    assert f"Checkpoint {cp['last']['id']} by vertex" in panel


def _assert_durations(
    durations: dict[str, Any], bursts: list[tuple[str, int, dict[str, Any]]], count: int
) -> None:
    """One point per stored burst, its report's newest checkpoint, marked by its status."""
    assert len(bursts) == count

    def duration(report: dict[str, Any]) -> float | None:
        return _ms(report["checkpoints"]["last"]["duration_ms"])

    line, *marks = durations["data"]
    assert line["y"] == [duration(r) for _, _, r in bursts]
    for status in ("completed", "failed"):
        drawn = next(t for t in marks if t["name"] == status)
        ours = [(f"{run}/{b}", r) for run, b, r in bursts]
        ours = [(at, r) for at, r in ours if r["checkpoints"]["last"]["status"] == status]
        assert [c.split(" ")[0] for c in drawn["customdata"]] == [at for at, _ in ours]
        assert drawn["y"] == [duration(r) for _, r in ours]
    marked = {t["name"]: t["marker"]["symbol"] for t in marks}
    assert marked == {"completed": "circle", "failed": "x"}  # told apart by shape


@pytest.mark.slow
def test_quick_checkpoints_have_a_panel_that_blames_nothing(
    serve: ServeFactory, cp_watches: Watches
) -> None:
    """healthy-filter's checkpoints take milliseconds, most of them barriers in flight: the
    panel shows them and ties them to nothing."""
    client = serve(cp_watches).client
    latest = client.get(f"/api/v1/jobs/{QUICK}").json()["latest"]
    assert not [f for f in latest["findings"] if f["kind"].startswith("checkpoint")]
    last = latest["checkpoints"]["last"]
    assert last["status"] == "completed"
    page = client.get(f"/job/{QUICK}").text
    panel = _panel(page)
    assert 'class="card checkpoint-card"' in panel  # not framed as held
    assert "checkpoint-note" not in panel and "cause-link" not in panel
    assert "backpressure" not in panel
    assert _fact(panel, "newest") == (
        f"checkpoint {last['id']} completed in {last['duration_ms']:,.0f} ms"
    )
    assert _fact(panel, "failure") is None
    durations = _figure(page, "checkpoint-durations")
    failed = next(t for t in durations["data"] if t["name"] == "failed")
    assert failed["y"] == [] and failed["showlegend"] is False
    assert len(durations["data"][0]["y"]) == dict(CHECKPOINTED)["healthy"]


@pytest.mark.slow
def test_a_job_whose_newest_report_has_no_checkpoints_has_no_panel(
    serve: ServeFactory, cp_watches: Watches, checkpointed: Checkpointed
) -> None:
    """plain never checkpoints; checkpoint-timeouts gets a newer report without checkpoints
    (as a job run again with checkpointing off): neither page has a panel or its figures."""
    _, reports = checkpointed
    newest = reports[HELD][-1]
    later = replace(
        newest.window,
        start=newest.window.start + timedelta(minutes=5),
        end=newest.window.end + timedelta(minutes=5),
    )
    off = replace(
        newest,
        run_id=newest.run_id + "-off",
        window=later,
        checkpoints=None,
        findings=tuple(f for f in newest.findings if not f.kind.startswith("checkpoint")),
    )
    cp_watches.settings.store().save(off)
    client = serve(cp_watches).client
    for job in ("plain", HELD):
        assert client.get(f"/api/v1/jobs/{job}").json()["latest"]["checkpoints"] is None
        page = client.get(f"/job/{job}").text
        assert "checkpoint-card" not in page and "checkpoint-durations" not in page
        assert '<div id="checkpoints"></div>' in page
        live = client.get(f"/job/{job}/live.json").json()
        assert (live["checkpoints"], live["checkpoint_figures"]) == ("", {})
    assert "checkpoint-card" in client.get(f"/job/{QUICK}").text  # the other job keeps its own


# ------------------------------------------------------------------- what the rules say


AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _judged(
    window: CheckpointWindow, causes: tuple[RootCause, ...], vertices: tuple[VertexStatus, ...]
) -> Report:
    """A report of ``window`` with the findings the rules give it."""
    cp = checkpoint_report(window)
    found = checkpoint_findings(window, cp, causes, vertices, TargetSettings(), CheckpointRules())
    frame = Window(AT, AT + timedelta(seconds=5), 100, 50.0)
    return Report("run-c", "c", "runtime", frame, vertices, causes, tuple(found), checkpoints=cp)


def _vertices(hard: float = 0.0) -> tuple[VertexStatus, ...]:
    pressed = Metrics(backpressured_time_ratio=0.9, hard_backpressured_ratio=hard)
    return (
        VertexStatus(
            "source", 1, "HIGH", 0.9, pressed, (), (SubtaskStatus(0, "HIGH", 0.9, pressed),)
        ),
        VertexStatus("window", 1, "OK", 0.0, Metrics(busy_ratio=1.0)),
    )


def _subtask(delay: float, align: float, sync: float, upload: float) -> SubtaskCheckpoint:
    return SubtaskCheckpoint(0, True, delay, align, sync, upload)


def test_a_checkpoint_slow_for_its_own_reasons_is_not_blamed_on_backpressure() -> None:
    """A 9 s checkpoint spent uploading a large state while a root cause is named: the rules
    say checkpoint-slow, and the panel says so, with its remedies, and blames no backpressure."""
    checkpoint = Checkpoint(
        7,
        "completed",
        9000.0,
        (
            VertexCheckpoint("source", (_subtask(1.0, 0.0, 2.0, 10.0),)),
            VertexCheckpoint("window", (_subtask(20.0, 5.0, 300.0, 8600.0),)),
        ),
        state_bytes=3 << 30,
    )
    window = CheckpointWindow("aligned", 1000.0, 6, 0, last_completed=checkpoint)
    cause = RootCause("window", "slow-operator", (0,), 0.9, recommendation="Give window more.")
    report = _judged(window, (cause,), _vertices())
    slow = [f for f in report.findings if f.kind == "checkpoint-slow"]
    assert len(slow) == 1 and not [f for f in report.findings if "backpressure" in f.kind]
    panel, drawn = checkpoints.parts(report, [StoredBurst("run-c", 0, report)])
    assert 'data-kind="checkpoint-slow"' in panel and " held" not in panel
    tie = re.search(r'<p class="checkpoint-tie">(.*?)</p>', panel)
    assert tie is not None
    assert tie.group(1).startswith("Checkpoint 7 was slow for its own reasons, not backpressure")
    assert f"<b>{slow[0].vertex}</b>" in tie.group(1) and "cause-link" not in panel
    assert "backpressure from" not in panel
    shown = [html.unescape(r) for r in re.findall(r"<li>(.*?)</li>", panel)]
    assert shown == [slow[0].detail.split("remedies: ", 1)[1]]
    assert set(drawn) == {"checkpoint-durations", "checkpoint-phases"}
    for figure in drawn.values():
        go.Figure(figure)


def test_remedies_are_told_apart_where_a_remedy_holds_a_semicolon_of_its_own() -> None:
    """The rules' own detail of a checkpoint held by a hard backpressured source: each remedy
    once, in order, whatever semicolons the recommendation and the overdraft remedy hold."""
    slow = Checkpoint(
        3,
        "failed",
        4000.0,
        (
            VertexCheckpoint("source", (_subtask(1.0, 0.0, 0.0, 0.0),)),
            VertexCheckpoint("window", (SubtaskCheckpoint(0, False),)),
        ),
        failure="expired before completing",
    )
    window = CheckpointWindow("aligned", 1000.0, 2, 1, last_failed=slow)
    said = "Give window more (from ~500 records/s; `bpmon run --verify` tries it)."
    cause = RootCause("window", "slow-operator", (0,), 0.9, recommendation=said)
    report = _judged(window, (cause,), _vertices(hard=0.8))
    held = next(f for f in report.findings if f.kind == "checkpoint-backpressure")
    told = checkpoints.remedies(held.detail)
    assert "; ".join(told) == held.detail.split("remedies, in order: ", 1)[1]
    assert told[0] == "fix the bottleneck first: " + said.rstrip(".")
    assert [r.split(" ", 1)[0] for r in told[1:]] == ["then", "buffer", "overdraft"]


# ------------------------------------------------------------------------------- browser

DRAWN = """() => {
  const box = (e) => { const b = e.getBoundingClientRect(); return [b.left, b.right]; };
  const durations = document.getElementById('checkpoint-durations');
  const phases = document.getElementById('checkpoint-phases');
  return {
    points: durations.querySelectorAll('.scatterlayer path.point').length,
    bars: Array.from(phases.querySelectorAll('.barlayer .trace')).map((t) =>
      Array.from(t.querySelectorAll('.point path'), box)),
    link: document.querySelector('.checkpoint-tie a.cause-link').textContent,
  };
}"""
FOLLOWED = """() => {
  const target = document.querySelector(':target');
  const b = target ? target.getBoundingClientRect() : null;
  return {hash: location.hash, text: target ? target.textContent : null,
          seen: b !== null && b.top >= 0 && b.bottom <= window.innerHeight};
}"""


@pytest.mark.slow
def test_the_panel_draws_its_charts_and_links_to_the_root_cause_in_a_browser(
    browser: Any,  # noqa: F811
    shots: Path,  # noqa: F811
    serve: ServeFactory,
    cp_watches: Watches,
) -> None:
    served = serve(cp_watches)
    latest = served.client.get(f"/api/v1/jobs/{HELD}").json()["latest"]
    assert latest["root_causes"], latest["findings"]
    cp = latest["checkpoints"]
    bursts = dict(CHECKPOINTED)["checkpoint-timeouts"]
    start = [v["start_delay_ms"] for v in cp["vertices"]]
    for width, scheme in VARIANTS:
        page = Page(browser, f"{served.url}/job/{HELD}", shots, width, scheme)
        try:
            drawn = page.js(DRAWN)
            assert drawn["points"] == bursts  # one marker a burst
            assert drawn["link"] == latest["root_causes"][0]["vertex"]
            # the start-delay bars as long as the report's start delays, to a pixel or two
            delays = drawn["bars"][0]
            assert len(delays) == len(start)
            widest = max(start)
            unit = (delays[start.index(widest)][1] - delays[start.index(widest)][0]) / widest
            for (left, right), value in zip(delays, start, strict=True):
                assert right - left == pytest.approx(value * unit, abs=2)
            page.page.click(".checkpoint-tie a.cause-link")
            page.page.wait_for_function("location.hash === '#root-cause-1'", timeout=WAIT_S * 1000)
            followed = page.js(FOLLOWED)
            assert followed["seen"] and f"at {drawn['link']}" in followed["text"], followed
            page.check("job-checkpoints")
        finally:
            page.close()


KEPT = """() => {
  const el = document.getElementById('checkpoint-durations');
  return {kept: el !== null && el.dataset.kept === 'yes', cards: document.querySelectorAll(
            '#checkpoint-card').length,
          points: el ? el.querySelectorAll('.scatterlayer path.point').length : 0,
          newest: (document.querySelector('[data-fact=newest]') || {}).textContent,
          latest: document.body.dataset.latest};
}"""


@pytest.mark.slow
def test_a_watched_jobs_panel_follows_each_new_report_in_place(
    browser: Any,  # noqa: F811
    shots: Path,  # noqa: F811
    serve: ServeFactory,
    cp_watches: Watches,
) -> None:
    """healthy watched, a burst every 2 s: on a new report the panel's facts are that report's
    and its figures are redrawn in the same elements, a point for each burst so far."""
    scenario = load_example("healthy")
    shorter = replace(scenario.monitor, samples=20, interval_ms=50.0, warmup_s=0.5)
    served = serve(cp_watches)
    job = cp_watches.start_scenario(
        replace(scenario, name="healthy-live", monitor=shorter), every_s=2.0
    )
    page = Page(browser, f"{served.url}/job/{job}", shots)
    try:
        page.page.wait_for_function(
            "document.getElementById('checkpoint-durations') !== null", timeout=WAIT_S * 1000
        )
        first = page.js(
            "() => { document.getElementById('checkpoint-durations').dataset.kept = 'yes';"
            " return document.body.dataset.latest; }"
        )
        page.page.wait_for_function(
            "(first) => document.body.dataset.latest !== first", arg=first, timeout=WAIT_S * 1000
        )
        now = page.js(KEPT)
        run, burst = now["latest"].rsplit("/", 1)  # the burst the page shows, whatever came since
        report = served.client.get(f"/api/v1/runs/{run}?burst={burst}").json()
        last = report["checkpoints"]["last"]
        assert now["kept"] and now["cards"] == 1, now
        said = re.fullmatch(r"checkpoint (\d+) completed in ([\d,]+) ms", now["newest"])
        assert said is not None, now
        assert int(said.group(1)) == last["id"]
        # the page has the watch's report, the API its JSON (durations to a tenth of a ms)
        assert float(said.group(2).replace(",", "")) == pytest.approx(last["duration_ms"], abs=1)
        history = served.client.get(f"/api/v1/jobs/{job}").json()["history"]
        shown = [(b["run_id"], str(b["burst"])) for b in history].index((run, burst)) + 1
        assert now["points"] == shown >= 2
        page.check("job-checkpoints-live")
    finally:
        page.close()
