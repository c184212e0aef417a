"""The service's watch of a Flink job through a hiccup and to its end: the Flink target and the
service's run loop together, on a recording of a real cluster served by a real HTTP server
whose answers change while the watch runs (the same on a real cluster: ``test_chaos.py``)."""

from __future__ import annotations

from pathlib import Path

from bpmon.model.events import JobEnded, JobFailed, ReportReady, Trouble
from bpmon.service.facade import Settings, monitor_flink

from .fake_flink import Script, job_id, recorded, serving

BUSY = (503, {"errors": ["Service temporarily unavailable due to an ongoing leader election."]})


def test_an_http_503_is_a_gap_in_the_watch_not_its_end(tmp_path: Path) -> None:
    script = Script(recorded("rescale/before"))
    # the job's details, read once at each window's start: between windows the watch reads the
    # job's status now and then (a 1 s cache), so 503s queued on /status could be met there,
    # split between two reads, on a loaded machine
    details = f"/jobs/{job_id(script.routes)}"
    reports: list[ReportReady] = []
    troubles: list[Trouble] = []
    with serving(script) as url:
        events = monitor_flink(
            url, samples=2, interval_ms=20, bursts=2, settings=Settings(runs_dir=tmp_path)
        )
        for event in events:
            if isinstance(event, ReportReady):
                reports.append(event)
                script.queued[details] = [BUSY] * 4  # the next window meets a leader election
            elif isinstance(event, Trouble):
                troubles.append(event)
            last = event
    assert isinstance(last, JobEnded) and not isinstance(last, JobFailed)
    assert len(reports) == 2
    [trouble] = troubles
    assert trouble.kind == "unavailable"
    assert "answered HTTP 503 (Service temporarily unavailable" in trouble.detail
    gaps = [f.detail for f in reports[1].report.findings if f.kind == "gap"]
    assert len(gaps) == 1 and f"to GET {details}, 4 times" in gaps[0], gaps
    assert not [f for f in reports[0].report.findings if f.kind == "gap"]


def test_a_cancelled_job_ends_the_watch_as_ended(tmp_path: Path) -> None:
    script = Script(recorded("rescale/before"))
    jid = job_id(script.routes)
    with serving(script) as url:
        events = monitor_flink(
            url, samples=2, interval_ms=20, bursts=None, settings=Settings(runs_dir=tmp_path)
        )
        for event in events:
            if isinstance(event, ReportReady):
                script.routes[f"/jobs/{jid}/status"] = (200, {"status": "CANCELED"})
            last = event
    assert isinstance(last, JobEnded) and not isinstance(last, JobFailed)
    assert last.reason == f"job 'bpmon-healthy' ({jid}) was CANCELED"
