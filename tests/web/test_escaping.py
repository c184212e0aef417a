"""Names are text on every page that shows them: a job, vertex, cause or finding whose name holds
``<script>`` and quotes reaches the browser escaped (the templates' autoescaping), never as markup.

The names are in real stored runs (the lookup chain before and after its bottleneck moved,
renamed, and given checkpoints whose vertices, failure and finding say markup, and autoscaler
verdicts that do too), served by a real uvicorn.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest
from markupsafe import escape

from bpmon.model.autoscaler import AutoscalerReport, AutoscalerVerdict, AutoscalerVertex
from bpmon.model.checkpoints import CheckpointPhases, CheckpointReport, LastCheckpoint
from bpmon.model.values import Finding, Report
from bpmon.service import facade
from bpmon.service.stored import StoredJobs
from bpmon.service.watching import Watches

from .dashboard_runs import Chain
from .servers import ServeFactory

JOB = 'evil<script>alert("job")\'&'
"""A job name that would run a script if a page wrote it as markup (no ``/``: it is a URL path)."""
VERTEX = "<script>alert('vertex')</script>\"&"
CAUSE_VERTEX = '<img src=x onerror="alert(1)">'
SAID = "<b>bold</b> & \"quoted\" 'text'"
"""A recommendation and a finding's detail: text, even when it looks like markup."""
RAW = (JOB, VERTEX, CAUSE_VERTEX, SAID, "<script>", "<img", "<b>bold")


def _renamed(report: Report, run_id: str) -> Report:
    """``report`` with the job, its vertices, its top cause and a finding named by RAW text."""
    top = report.root_causes[0] if report.root_causes else None
    assert top is not None, "the chain's runs name a root cause"
    names = {v.name: VERTEX + str(n) for n, v in enumerate(report.vertices)}
    names[top.vertex] = CAUSE_VERTEX
    vertices = tuple(
        replace(
            v,
            name=names[v.name],
            inputs=tuple(replace(e, source=names[e.source]) for e in v.inputs),
        )
        for v in report.vertices
    )
    cause = replace(top, vertex=CAUSE_VERTEX, recommendation=SAID)
    finding = Finding(kind="stall", vertex=VERTEX, detail=SAID)
    held = Finding(
        kind="checkpoint-backpressure",
        vertex=CAUSE_VERTEX,
        detail=f"checkpoint 5 failed ({SAID}); remedies, in order: fix it: {SAID}; then: {SAID}",
    )
    last = LastCheckpoint(5, "failed", 4000.0, 3900.0, 0.0, None, None, 0, 0, 3900.0, SAID)
    phases = tuple(
        CheckpointPhases(v.name, 3900.0, 0.0, None, None, 0, v.parallelism) for v in vertices
    )
    checkpoints = CheckpointReport("aligned", 1000.0, 2, 3, last, phases)
    rows = tuple(
        AutoscalerVertex(v.name, 1.0, 100.0, 200.0, 0.0, v.parallelism, v.parallelism + 1)
        for v in vertices
    )
    verdicts = tuple(
        AutoscalerVerdict(
            v.name, "misses" if v.name == CAUSE_VERTEX else "scales-wrong-vertex", SAID
        )
        for v in vertices
    )
    autoscaler = AutoscalerReport({}, rows, verdicts, acts=True)
    return replace(
        report,
        run_id=run_id,
        job=JOB,
        vertices=vertices,
        root_causes=(cause,),
        findings=(finding, held),
        channels=(),
        checkpoints=checkpoints,
        autoscaler=autoscaler,
    )


@pytest.fixture
def evil_watches(chain: Chain, tmp_path: Path) -> tuple[Watches, list[str]]:
    """A registry over the chain's two runs, renamed; their run ids, oldest first."""
    settings = facade.Settings(runs_dir=tmp_path / "runs")
    store = settings.store()
    ids = []
    for n, report in enumerate(chain[1:]):
        run_id = f"{report.run_id}-escaped-{n}"
        store.save(_renamed(report, run_id))
        ids.append(run_id)
    watches = Watches(settings, every_s=None, stored=StoredJobs(settings, ttl_s=0))
    return watches, ids


def _assert_text(page: str, url: str) -> None:
    """No name is markup in ``page``, and the job's name is there, escaped."""
    for raw in RAW:
        assert raw not in page, f"{url} writes {raw!r} as markup"
    assert "evil&lt;script&gt;alert(" in page, f"{url} does not show the job's name"


def test_names_with_markup_are_text_on_every_page(
    serve: ServeFactory, evil_watches: tuple[Watches, list[str]]
) -> None:
    watches, ids = evil_watches
    client = serve(watches).client
    job = quote(JOB, safe="")
    urls = [
        "/",
        f"/job/{job}",
        f"/run/{ids[0]}",
        f"/compare?job={job}",
        "/history",
    ]
    for url in urls:
        answer = client.get(url)
        assert answer.status_code == 200, f"{url}: {answer.status_code}"
        _assert_text(answer.text, url)
    job_page = client.get(f"/job/{job}").text
    assert re.search(r'data-job="evil&lt;script&gt;alert\(&#34;job&#34;\)', job_page)
    assert "&lt;script&gt;alert(&#39;vertex&#39;)&lt;/script&gt;" in job_page  # the table, select
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &#34;quoted&#34;" in job_page  # the finding
    assert "checkpoint 5 failed after 4,000 ms" in job_page  # the checkpoint panel is there
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &#34;quoted&#34; &#39;text&#39;</dd>" in job_page
    said, named = escape(SAID), escape(VERTEX)  # as the templates escape them
    assert f'<p class="autoscaler-detail">{said}</p>' in job_page  # beside the recommendation
    assert f'<li data-vertex="{named}0" data-verdict="scales-wrong-vertex">' in job_page
    live = client.get(f"/job/{job}/live.json").json()
    for key in ("head", "cause", "table", "options", "checkpoints"):  # the fragments redrawn
        assert not [raw for raw in RAW if raw in live[key]], f"live.json's {key} holds markup"
    culprit = re.search(r'<b class="culprit-name">([^<]*)</b>', live["cause"])
    assert culprit is not None and html.unescape(culprit.group(1)) == CAUSE_VERTEX


def test_figures_carry_names_as_json_that_cannot_close_their_script_block(
    serve: ServeFactory, evil_watches: tuple[Watches, list[str]]
) -> None:
    watches, _ = evil_watches
    page = serve(watches).client.get(f"/job/{quote(JOB, safe='')}").text
    blocks = re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', page)
    assert {name for name, _ in blocks} >= {"graph-json", "heatmap-json", "series-data"}
    for _, text in blocks:
        assert "<" not in text  # a name's </script> would end the block early
    graph = json.loads(dict(blocks)["graph-json"])
    assert CAUSE_VERTEX in graph["layout"]["meta"]["vertices"]  # the name itself, as JSON reads it
    # plotly writes a label's tags as markup: the checkpoint figures hand it names escaped
    phases = json.loads(dict(blocks)["checkpoint-phases-json"])
    assert CAUSE_VERTEX in phases["layout"]["meta"]["vertices"]
    for trace in phases["data"]:
        assert html.escape(CAUSE_VERTEX, quote=False) in trace["y"]
        assert not [raw for raw in RAW for label in trace["y"] if raw in label]
    durations = json.loads(dict(blocks)["checkpoint-durations-json"])
    hovers = [text for trace in durations["data"] for text in trace.get("text", [])]
    assert hovers and all(html.escape(SAID, quote=False) in text for text in hovers)
