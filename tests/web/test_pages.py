"""The dashboard's pages through a real uvicorn: what each page says, its figures, the sign-in.

The job pages read real runs (the tiny jobs ``alpha`` and ``beta``, the lookup chain before and
after a change that moves its bottleneck, the hot key, a py-spy'd pipeline); what a browser does
with them is in ``test_browser.py``.
"""

from __future__ import annotations

import gzip
import html
import re
import shutil
from dataclasses import replace
from importlib.resources import files
from pathlib import Path
from typing import Any

import httpx
import pytest

from bpmon.model.autoscaler import AutoscalerVerdict
from bpmon.model.values import Report
from bpmon.scenario import load_scenario, parse_scenario
from bpmon.service import facade
from bpmon.service.scenarios import shipped_examples
from bpmon.service.stored import StoredJobs
from bpmon.service.watching import Watches
from bpmon.service.whatif import SettingChange, changed
from bpmon.web.graph import job_graph
from bpmon.web.shell import plotly_name
from bpmon.web.templating import macro

from .dashboard_runs import Chain, copy_runs
from .servers import TOKEN, WAIT_S, ServeFactory, tiny, wait_until


@pytest.fixture
def chain_watches(chain: Chain, tmp_path: Path) -> Watches:
    """A registry over a copy of the chain's runs (tests may add files to it)."""
    runs = tmp_path / "runs"
    shutil.copytree(chain[0], runs)
    settings = facade.Settings(runs_dir=runs)
    return Watches(settings, every_s=None, stored=StoredJobs(settings, ttl_s=0))


def test_the_jobs_page_lists_every_stored_job_with_its_level(
    serve: ServeFactory, watches: Watches
) -> None:
    page = serve(watches).client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    rows = dict(re.findall(r'<tr data-job="([^"]+)">(.*?)</tr>', page.text))
    assert set(rows) == {"alpha", "beta"}
    for row in rows.values():
        assert re.search(r'class="level level-(ok|low|high)">(OK|LOW|HIGH)<', row)
        assert 'data-state="stored"' in row
    for example in shipped_examples():
        assert f'<option value="{example}">' in page.text
    assert "plotly" not in page.text  # no figure on this page: no 4.8 MB of plotly.js


def test_the_job_page_holds_the_graph_the_root_cause_and_the_series(
    serve: ServeFactory, chain_watches: Watches, chain: Chain
) -> None:
    _, _, after = chain
    client = serve(chain_watches).client
    page = client.get("/job/lookup-chain")
    assert page.status_code == 200
    graph = _figure(page.text, "graph")
    vertices = graph["layout"]["meta"]["vertices"]
    assert list(vertices) == [v.name for v in after.vertices]
    assert [n for n, v in vertices.items() if v["root_cause"]] == ["store"]
    panel = page.text.split('id="cause-panel">', 1)[1].split("</section>", 1)[0]
    assert "slow-sink" in panel and '<b class="culprit-name">store</b>' in panel
    series = _figure(page.text, "series-data")
    assert set(series["vertices"]) == {v.name for v in after.vertices}
    assert f'src="/static/{plotly_name()}"' in page.text
    live = client.get("/job/lookup-chain/live.json").json()
    assert live["graph"] == graph and live["latest"] == f"{after.run_id}/0"


def test_unknown_jobs_and_runs_are_pages_saying_so(serve: ServeFactory, watches: Watches) -> None:
    client = serve(watches).client
    for url in ("/job/nope", "/run/nope", "/run/%2E%2E", "/run/alpha%2F..%2F..", "/compare?job=x"):
        page = client.get(url)
        if url.startswith("/compare"):
            assert page.status_code == 200 and "fewer than two stored runs" in page.text
            continue
        assert page.status_code == 404, url
        if url.endswith("nope"):
            assert 'role="alert"' in page.text and "page lists" in page.text


def test_a_run_page_is_the_whole_report_with_a_link_to_its_json(
    serve: ServeFactory, watches: Watches
) -> None:
    client = serve(watches).client
    runs = client.get("/api/v1/runs?job=alpha").json()["runs"]
    two = next(r for r in runs if r["bursts"] == 2)
    page = client.get(f"/run/{two['run_id']}?burst=1")
    assert page.status_code == 200
    report = client.get(f"/api/v1/runs/{two['run_id']}?burst=1").json()
    assert f'href="/api/v1/runs/{two["run_id"]}?burst=1"' in page.text
    for vertex in report["vertices"]:
        assert f'data-vertex="{vertex["name"]}"><th scope="row">{vertex["name"]}</th>' in page.text
    assert page.text.count('aria-label="Bursts of this run"') == 1  # two bursts: a choice
    assert client.get(f"/run/{two['run_id']}?burst=7").status_code == 404


def test_compare_names_the_moved_bottleneck(
    serve: ServeFactory, chain_watches: Watches, chain: Chain
) -> None:
    _, before, after = chain
    page = serve(chain_watches).client.get("/compare?job=lookup-chain")
    assert page.status_code == 200
    moved = re.search(r'data-kind="moved-bottleneck">([^<]+)<', page.text)
    assert moved is not None
    assert moved.group(1).startswith("the bottleneck moved from geo-lookup (slow-operator")
    assert "to store (slow-sink" in moved.group(1)
    assert f'Before: <a href="/run/{before.run_id}' in page.text
    assert f'After: <a href="/run/{after.run_id}' in page.text
    assert '<tr data-vertex="geo-lookup">' in page.text


def test_compare_quotes_the_min_busy_of_the_rules_in_force(
    serve: ServeFactory, chain: Chain, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text("[capacity]\nmin_busy = 0.25\n")  # not the default 0.1
    shutil.copytree(chain[0], tmp_path / "runs")  # the session's runs stay as they are
    settings = facade.Settings(runs_dir=tmp_path / "runs", rules_path=rules)
    watches = Watches(settings, every_s=None, stored=StoredJobs(settings, ttl_s=0))
    page = serve(watches).client.get("/compare?job=lookup-chain").text
    assert "(busy under 25%) to tell" in page


def test_history_links_the_analytics_report_and_serves_it_from_its_folder_only(
    serve: ServeFactory, chain_watches: Watches
) -> None:
    client = serve(chain_watches).client
    page = client.get("/history")
    assert "bpmon analyze --format html" in page.text
    assert _figure(page.text, "trend-0")["layout"]["meta"]["job"] == "lookup-chain"
    folder = chain_watches.settings.runs_dir / "analysis"
    folder.mkdir()
    (folder / "analysis.html").write_text("<h1>trends</h1>")
    (chain_watches.settings.runs_dir / "secret.html").write_text("no")
    page = client.get("/history")
    assert 'href="/history/analysis/analysis.html"' in page.text
    assert client.get("/history/analysis/analysis.html").text == "<h1>trends</h1>"
    for name in ("..%2Fsecret.html", "secret.html", "analysis.txt"):
        assert client.get(f"/history/analysis/{name}").status_code == 404


def test_plotly_js_comes_from_the_installed_package_gzipped_and_cached(
    serve: ServeFactory, watches: Watches
) -> None:
    served = serve(watches)
    url = f"{served.url}/static/{plotly_name()}"
    shipped = files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    with httpx.Client(timeout=WAIT_S) as raw:
        with raw.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as answer:
            sent = b"".join(answer.iter_raw())  # as it travelled, not decompressed
        assert answer.status_code == 200
        assert answer.headers["content-encoding"] == "gzip"
        assert "immutable" in answer.headers["cache-control"]
        assert len(sent) < len(shipped) / 2 and gzip.decompress(sent) == shipped
        again = raw.get(url, headers={"If-None-Match": answer.headers["etag"]})
        assert again.status_code == 304
    assert served.client.get("/static/nope.js").status_code == 404
    assert (
        served.client.get("/static/dashboard.js")
        .headers["content-type"]
        .startswith("text/javascript")
    )


def test_with_a_token_pages_ask_for_it_once_and_keep_it_in_a_cookie(
    serve: ServeFactory, watches: Watches
) -> None:
    served = serve(watches, token=TOKEN)
    with httpx.Client(base_url=served.url, timeout=WAIT_S) as browser:
        html = {"Accept": "text/html"}
        sent = browser.get("/job/alpha", headers=html)
        assert sent.status_code == 303 and sent.headers["location"] == "/login?next=/job/alpha"
        assert browser.get("/api/v1/jobs").status_code == 401  # an API client is not redirected
        wrong = browser.post("/login", data={"token": "x" * 30, "next": "/job/alpha"})
        assert wrong.status_code == 401 and "not this server" in wrong.text
        assert "bpmon_token" not in browser.cookies
        signed = browser.post("/login", data={"token": TOKEN, "next": "//evil.example/"})
        assert signed.status_code == 303 and signed.headers["location"] == "/"
        assert "httponly" in signed.headers["set-cookie"].lower()
        assert "samesite=strict" in signed.headers["set-cookie"].lower()
        assert "secure" not in signed.headers["set-cookie"].lower()  # plain HTTP (test_tls.py)
        assert browser.get("/job/alpha", headers=html).status_code == 200
        assert browser.get("/api/v1/jobs").status_code == 200
        browser.get("/logout")
        assert browser.get("/", headers=html).status_code == 303


def test_vertex_names_are_text_everywhere(chain: Chain) -> None:
    from dataclasses import replace

    from bpmon.web import markup

    _, before, _ = chain
    evil = "<img src=x onerror=alert(1)></script>"
    first = replace(before.vertices[0], name=evil)
    report = replace(before, vertices=(first, *before.vertices[1:]))
    table = markup.vertex_table_html(report)
    assert evil not in table and "&lt;img src=x" in table
    block = macro("figures.html", "json_block", "graph-json", job_graph(report))
    assert "</script>" not in block.removesuffix("</script>") and "<img" not in block


def _figure(text: str, name: str) -> dict:  # type: ignore[type-arg]
    import json

    found = re.search(
        rf'<script type="application/json" id="{name}(?:-json)?">(.*?)</script>', text
    )
    assert found is not None, f"no {name} figure"
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def test_history_counts_bursts_and_runs_in_the_right_number(
    serve: ServeFactory, watches: Watches
) -> None:
    page = serve(watches).client.get("/history").text
    assert "3 bursts in 2 stored runs" in page  # alpha: runs of 1 and 2 bursts
    assert "1 burst in 1 stored run<" in page  # beta, not "1 bursts in 1 stored runs"


def test_a_watched_jobs_series_are_its_own_runs_not_its_stored_ones(
    serve: ServeFactory, watches: Watches
) -> None:
    """Job alpha has two stored runs (as ``bpmon run`` or ``whatif`` leave them); a watch of
    alpha draws only its own bursts over time, and the History page still lists them all."""
    client = serve(watches).client
    stored = {r["run_id"] for r in client.get("/api/v1/runs?job=alpha").json()["runs"]}
    watches.start_scenario(parse_scenario(tiny("alpha")))

    def own_report() -> bool:
        view = watches.job("alpha")
        return view is not None and view.latest is not None and view.latest.run_id not in stored

    wait_until(own_report, "the watch's first report")
    live = client.get("/job/alpha/live.json").json()
    own = {label.split("/")[0] for label in live["series"]["labels"] if label}
    assert len(own) == 1 and len(stored) == 2 and not stored & own
    labels = [a["text"] for a in live["series"]["axis"]["annotations"]]
    assert labels == [f"run …{own.pop()[-4:]}"]
    history = client.get("/history").text
    assert all(f'href="/run/{run}"' in history for run in stored)


def test_a_what_if_run_stays_off_its_jobs_page_and_is_offered_by_compare(
    serve: ServeFactory, tmp_path: Path
) -> None:
    """``bpmon whatif`` stores the changed run as ``alpha with ...``: alpha's page never shows
    it, and Compare pairs it with alpha's own run."""
    path = tmp_path / "alpha.toml"
    path.write_text(tiny("alpha"))
    settings = facade.Settings(runs_dir=tmp_path / "runs")
    scenario = load_scenario(path)
    tried = changed(scenario, [SettingChange("out", "parallelism", 2)])
    ids = [facade.drain(facade.run_scenario(s, settings, bursts=1, duration_s=0.1)).run_id
           for s in (scenario, tried)]  # fmt: skip
    watches = Watches(settings, every_s=0.2, stored=StoredJobs(settings, ttl_s=0))
    client = serve(watches).client
    own = client.get("/api/v1/runs?job=alpha").json()["runs"]
    assert [r["run_id"] for r in own] == [ids[0]]
    page = client.get("/compare?job=alpha").text
    assert f'<option value="{ids[1]}" selected>' in page  # after: the experiment
    assert f'<option value="{ids[0]}" selected>' in page  # before: alpha's own run
    assert "alpha with out.parallelism=2" in page


def test_the_run_page_draws_the_graph_first_and_marks_the_root_cause_row(
    serve: ServeFactory, chain_watches: Watches, chain: Chain
) -> None:
    _, before, _ = chain
    page = serve(chain_watches).client.get(f"/run/{before.run_id}")
    assert page.status_code == 200
    assert page.text.index('id="graph"') < page.text.index('class="vertices"')
    across, down = _figure(page.text, "graph"), _figure(page.text, "graph-down")
    assert (across["layout"]["meta"]["direction"], down["layout"]["meta"]["direction"]) == (
        "across",
        "down",
    )
    marked = re.findall(r'<tr class="vertex culprit" data-vertex="([^"]+)">', page.text)
    assert marked == ["geo-lookup"]  # slow-operator at geo-lookup, subtasks 0 and 1
    named = re.findall(
        r'<tr class="subtask named" data-vertex="([^"]+)"><th scope="row">(\[\d\])', page.text
    )
    assert named == [("geo-lookup", "[0]"), ("geo-lookup", "[1]")]


def test_a_skewed_job_opens_its_heat_map_on_busy_share_with_the_hot_subtask_framed(
    serve: ServeFactory, skew: tuple[Path, Report], tmp_path: Path
) -> None:
    runs, report = skew
    cause = report.root_causes[0] if report.root_causes else None
    assert cause is not None and (cause.kind, cause.vertex, cause.subtasks) == (
        "data-skew",
        "aggregate",
        (0,),
    )
    copy_runs(runs, tmp_path / "runs")
    settings = facade.Settings(runs_dir=tmp_path / "runs")
    page = serve(Watches(settings, every_s=None)).client.get("/job/hot-customer").text
    assert re.search(r'value="1" checked> busy share', page)
    assert not re.search(r'value="0" checked', page)
    heat = _figure(page, "heatmap")
    ratio, busy = heat["data"]
    assert (ratio["visible"], busy["visible"]) == (False, True)
    row = heat["layout"]["meta"]["vertices"].index("aggregate")
    assert busy["z"][row][0] == 1.0 and ratio["z"][row] == [0.0] * 4  # why ratio hides it
    assert busy["text"][row][0].startswith("★")
    frames = [s for s in heat["layout"]["shapes"] if s["name"] == "named-subtask"]
    assert [(f["x0"], f["x1"], f["y0"], f["y1"]) for f in frames] == [
        (-0.5, 0.5, row - 0.5, row + 0.5)
    ]


def test_a_pyspy_job_lists_only_the_lines_it_has_figures_for(
    serve: ServeFactory, pyspy: tuple[Path, Report, Report], tmp_path: Path
) -> None:
    runs, bare, etl = pyspy
    copy_runs(runs, tmp_path / "runs")
    settings = facade.Settings(runs_dir=tmp_path / "runs")
    client = serve(Watches(settings, every_s=None)).client
    live = client.get(f"/job/{etl.job}/live.json").json()
    assert live["series"]["keys"] == ["ratio", "busy", "idle"]  # no pools, no record rates
    legend = re.findall(r"</span>([^<]+)</li>", live["series_legend"])
    assert legend == ["backpressure ratio", "busy", "idle"]
    assert [t["name"] for t in live["series_figure"]["data"]] == legend
    page = client.get(f"/job/{bare.job}").text
    graph = _figure(page, "graph")
    assert graph["layout"]["meta"]["unconnected"] is True
    assert "no topology" in page
    boxes = {
        a["name"][7:]: a
        for a in graph["layout"]["annotations"]
        if a.get("name", "").startswith("vertex:")
    }
    ys = {round(b["y"], 3) for b in boxes.values()}
    assert ys == {0.0}  # one row, not stacked
    # the backpressured producers first, the busy consumer next, the idle main thread last
    assert max(boxes["ingest"]["x"], boxes["transform"]["x"]) < boxes["upload"]["x"]
    assert boxes["upload"]["x"] < boxes["MainThread"]["x"]


# ------------------------------------------------------------------- the autoscaler's opinion

OPINION = re.compile(
    r'<div class="autoscaler-opinion (agrees|disagrees)" data-vertex="([^"]*)" '
    r'data-verdict="([^"]*)"><p class="autoscaler-line">(.*?)</p>'
    r'<p class="autoscaler-detail">(.*?)</p></div>'
)
"""What Flink's autoscaler would do to a root cause's vertex, as the panel writes it."""
OTHERS = re.compile(r'<div class="autoscaler-others"><h3>([^<]*)</h3><ul>(.*?)</ul></div>')
"""The autoscaler's other disagreements."""


def _text(fragment: str) -> str:
    """A fragment of HTML as the eye reads it: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _cause_part(page: str) -> str:
    """The Job page's cause panel (its ``<div id="cause-panel">``)."""
    return page.split('id="cause-panel">', 1)[1].split("</section>", 1)[0]


def _serving(serve: ServeFactory, tmp_path: Path, *reports: Report) -> httpx.Client:
    """A server over a runs directory holding ``reports``, each a run of its own."""
    settings = facade.Settings(runs_dir=tmp_path / "runs")
    for report in reports:
        settings.store().save(report)
    return serve(Watches(settings, every_s=None, stored=StoredJobs(settings, ttl_s=0))).client


def _short(verdict: dict[str, Any], row: dict[str, Any] | None) -> dict[str, Any]:
    """A verdict in the job summary's short form, from the report's own JSON."""
    return {
        "vertex": verdict["vertex"],
        "verdict": verdict["verdict"],
        "parallelism": None if row is None else row["parallelism"],
        "recommended_parallelism": None if row is None else row["recommended_parallelism"],
        "detail": verdict["detail"],
    }


def test_the_autoscalers_opinion_stands_beside_the_recommendation(
    serve: ServeFactory, skew: tuple[Path, Report], tmp_path: Path
) -> None:
    """The hot key: Flink's autoscaler sees aggregate 100% busy and would scale it up, which
    leaves the key on one subtask: scales-ineffectively, right under bpmon's recommendation to
    spread the key, on the Job page, in its live part and on the Run page; the job's summary in
    the API says the same. Every figure is the report's own, as the API serves it."""
    runs, report = skew
    copy_runs(runs, tmp_path / "runs")
    settings = facade.Settings(runs_dir=tmp_path / "runs")
    client = serve(Watches(settings, every_s=None)).client
    doc = client.get("/api/v1/jobs/hot-customer").json()
    opinion = doc["latest"]["autoscaler"]
    assert opinion is not None and doc["latest"]["root_causes"][0]["vertex"] == "aggregate"
    rows = {v["name"]: v for v in opinion["vertices"]}
    mine = [v for v in opinion["verdicts"] if v["vertex"] == "aggregate"]
    assert [v["verdict"] for v in mine] == ["scales-ineffectively"], opinion["verdicts"]
    row = rows["aggregate"]
    assert row["recommended_parallelism"] > row["parallelism"] == 4, row
    move = f"{row['parallelism']} → {row['recommended_parallelism']}"
    others = [v for v in opinion["verdicts"] if v not in mine and v["verdict"] != "agrees"]
    page = client.get("/job/hot-customer").text
    panel = _cause_part(page)
    shown = OPINION.findall(panel)
    assert len(shown) == 1, panel
    css, vertex, verdict, line, detail = shown[0]
    assert (css, vertex, verdict) == ("disagrees", "aggregate", "scales-ineffectively")
    assert _text(line) == f"Flink's autoscaler would: {move} scales-ineffectively"
    assert _text(detail) == mine[0]["detail"] and "hot key" in mine[0]["detail"]
    assert panel.index('class="recommendation"') < panel.index("autoscaler-opinion")
    assert bool(OTHERS.search(panel)) is bool(others)
    live = client.get("/job/hot-customer/live.json").json()
    assert OPINION.findall(live["cause"]) == shown
    run_page = client.get(f"/run/{report.run_id}").text
    assert OPINION.findall(run_page) == shown
    expected = {
        "acts": opinion["acts"],
        "root_cause": _short(mine[0], row),
        "disagreements": [
            _short(v, rows.get(v["vertex"]))
            for v in opinion["verdicts"]
            if v["verdict"] != "agrees"
        ],
    }
    assert doc["autoscaler"] == expected
    listed = client.get("/api/v1/jobs").json()["jobs"]
    assert [j["autoscaler"] for j in listed if j["job"] == "hot-customer"] == [expected]


def test_without_the_autoscalers_opinion_there_is_nothing_of_it(
    serve: ServeFactory, skew: tuple[Path, Report], tmp_path: Path
) -> None:
    """A report whose ``autoscaler`` is None (py-spy, a saturated window, an older report): no
    box, no heading, no empty list, on either page; the job summary's ``autoscaler`` is null."""
    _, report = skew
    bare = replace(report, run_id=f"{report.run_id}-bare", autoscaler=None)
    client = _serving(serve, tmp_path, bare)
    for url in ("/job/hot-customer", f"/run/{bare.run_id}"):
        page = client.get(url).text
        assert "autoscaler" not in page and "Flink&#39;s autoscaler" not in page, url
        assert "Spread the hot key" in page  # the recommendation is there, alone
    assert client.get("/api/v1/jobs/hot-customer").json()["autoscaler"] is None


def test_the_autoscalers_other_disagreements_are_a_short_list(
    serve: ServeFactory, skew: tuple[Path, Report], tmp_path: Path
) -> None:
    """The hot key's report with one more verdict, as the rules write it for a vertex that is no
    cause: the autoscaler would also scale payments, scales-wrong-vertex. The root cause keeps
    its own verdict beside the recommendation; payments is one line of a short list after the
    causes, its move from the vertex's figures; the summary lists both disagreements."""
    _, report = skew
    assert report.autoscaler is not None
    rows = tuple(
        replace(v, recommended_parallelism=6, delayed=False) if v.name == "payments" else v
        for v in report.autoscaler.vertices
    )
    wrong = AutoscalerVerdict(
        "payments",
        "scales-wrong-vertex",
        "it would scale payments 2 -> 6, which is not what limits the job (data-skew at aggregate)",
    )
    autoscaler = replace(
        report.autoscaler, vertices=rows, verdicts=(*report.autoscaler.verdicts, wrong)
    )
    wider = replace(report, run_id=f"{report.run_id}-wider", autoscaler=autoscaler)
    client = _serving(serve, tmp_path, wider)
    for url in ("/job/hot-customer", f"/run/{wider.run_id}"):
        page = client.get(url).text
        assert [v for _, v, _, _, _ in OPINION.findall(page)] == ["aggregate"], url
        others = OTHERS.findall(page)
        assert len(others) == 1, url
        heading, items = others[0]
        assert _text(heading) == "Flink's autoscaler elsewhere"
        listed = re.findall(r'<li data-vertex="([^"]*)" data-verdict="([^"]*)">(.*?)</li>', items)
        assert [(v, k) for v, k, _ in listed] == [("payments", "scales-wrong-vertex")]
        assert _text(listed[0][2]) == f"scales-wrong-vertex at payments (2 → 6): {wrong.detail}"
        assert page.index("autoscaler-opinion") < page.index("autoscaler-others")
    summary = client.get("/api/v1/jobs/hot-customer").json()["autoscaler"]
    assert [(d["vertex"], d["verdict"]) for d in summary["disagreements"]] == [
        ("aggregate", "scales-ineffectively"),
        ("payments", "scales-wrong-vertex"),
    ]
    moved = summary["disagreements"][1]
    assert (moved["parallelism"], moved["recommended_parallelism"]) == (2, 6)


def test_a_job_nothing_limits_says_in_one_line_whether_the_autoscaler_would_scale(
    serve: ServeFactory, watches: Watches, tmp_path: Path
) -> None:
    """The tiny job alpha names no root cause and its autoscaler has no verdict: one line says
    what it would do, from its vertices' figures (a scale-down waits its interval). Given a
    scale-up of that healthy job (over-provisions, as the rules write it), the line is a short
    list under "Flink's autoscaler" instead."""
    client = serve(watches).client
    latest = client.get("/api/v1/jobs/alpha").json()["latest"]
    opinion = latest["autoscaler"]
    assert latest["root_causes"] == [] and opinion is not None and opinion["verdicts"] == []
    changes = [
        f"{v['name']} {v['parallelism']} → {v['recommended_parallelism']}"
        + (" after its scale-down interval" if v["delayed"] else "")
        for v in opinion["vertices"]
        if v["recommended_parallelism"] != v["parallelism"]
    ]
    said = (
        "Flink's autoscaler would scale " + ", ".join(changes) + "."
        if opinion["acts"] and changes
        else "Flink's autoscaler would not scale: every vertex's processing rate is within its "
        "bounds."
    )
    panel = _cause_part(client.get("/job/alpha").text)
    quiet = re.findall(r'<p class="autoscaler-line autoscaler-quiet">(.*?)</p>', panel)
    assert [_text(q) for q in quiet] == [said] and not OTHERS.search(panel)
    assert panel.index("no-cause") < panel.index("autoscaler-quiet")

    report = facade.load_report(latest["run_id"], watches.settings)
    assert report.autoscaler is not None
    out = report.autoscaler.vertices[-1]
    up = replace(out, recommended_parallelism=out.parallelism + 2, delayed=False)
    over = AutoscalerVerdict(
        out.name,
        "over-provisions",
        f"it would scale {out.name} {out.parallelism} -> {up.recommended_parallelism} though "
        "nothing limits the job",
    )
    autoscaler = replace(
        report.autoscaler, vertices=(*report.autoscaler.vertices[:-1], up), verdicts=(over,)
    )
    scaled = replace(report, run_id=f"{report.run_id}-up", job="scaled", autoscaler=autoscaler)
    panel = _cause_part(_serving(serve, tmp_path, scaled).get("/job/scaled").text)
    assert "autoscaler-quiet" not in panel
    others = OTHERS.findall(panel)
    assert [_text(h) for h, _ in others] == ["Flink's autoscaler"]
    move = f"{out.parallelism} → {up.recommended_parallelism}"
    assert _text(others[0][1]) == f"over-provisions at {out.name} ({move}): {over.detail}"
