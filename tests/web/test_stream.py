"""Server-sent events through a real uvicorn: a new report arrives while the job runs, and the
stream of a watch that ended (or of a job that is only stored) says so and closes.

Each test reads the stream as a browser would (``text/event-stream``, events separated by blank
lines) while the tiny scenario runs on the real runtime, a burst every 0.2 s.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bpmon.model.report_json import report_from_json
from bpmon.scenario import parse_scenario
from bpmon.service import facade
from bpmon.service.subscriptions import Notice, Subscription
from bpmon.service.watching import Watches
from bpmon.web.stream import event_text

from .servers import WAIT_S, ServeFactory, tiny, wait_until

Block = dict[str, str]


def blocks(lines: Iterator[str]) -> Iterator[Block]:
    """SSE blocks as ``{field: value}``; comments under ``":"``."""
    block: Block = {}
    for line in lines:
        if line == "":
            if block:
                yield block
            block = {}
            continue
        name, _, value = line.partition(":")
        block[name] = block.get(name, "") + value.removeprefix(" ")
    if block:
        yield block


@pytest.fixture
def live(runs_dir: Path) -> Watches:
    """A registry watching job ``live`` (tiny scenario), a burst every 0.2 s."""
    watches = Watches(facade.Settings(runs_dir=runs_dir), every_s=0.2)
    watches.start_scenario(parse_scenario(tiny("live")))
    return watches


def test_each_new_report_arrives_as_an_event(serve: ServeFactory, live: Watches) -> None:
    served = serve(live)
    with served.client.stream("GET", "/api/v1/jobs/live/events") as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.headers["cache-control"] == "no-store"
        events = blocks(stream.iter_lines())
        opening = next(events)
        assert opening["retry"] == "3000" and "watching job" in opening[""]
        view = live.job("live")
        assert view is not None
        seen = len(view.recent_bursts)  # bursts before the stream was open
        reports = [next(e for e in events if e.get("event") == "report") for _ in range(2)]
    bursts = []
    for event in reports:
        report = report_from_json(event["data"])
        assert (report.job, report.run_id) == ("live", view.run_id)
        run_id, _, burst = event["id"].partition("/")
        assert run_id == view.run_id
        bursts.append(int(burst))
    assert bursts[0] >= seen - 1 and bursts[1] > bursts[0]  # new reports, in order


def test_a_stopped_watch_is_announced_and_its_stream_ends(
    serve: ServeFactory, live: Watches
) -> None:
    served = serve(live)
    with served.client.stream("GET", "/api/v1/jobs/live/events") as stream:
        events = blocks(stream.iter_lines())
        next(events)
        stopper = threading.Thread(target=served.client.delete, args=("/api/v1/jobs/live",))
        stopper.start()
        state = next(e for e in events if e.get("event") == "state")
        rest = list(events)  # the server closes the stream: this returns
        stopper.join(WAIT_S)
    assert json.loads(state["data"])["state"] == "ended"
    assert rest == []
    run_id = json.loads(state["data"])["run_id"]
    assert state["id"] == f"{run_id}/ended"


def test_a_stream_opened_after_the_watch_ended_sends_the_end_and_closes(
    serve: ServeFactory, live: Watches
) -> None:
    served = serve(live)
    assert served.client.delete("/api/v1/jobs/live").status_code == 200
    with served.client.stream("GET", "/api/v1/jobs/live/events") as stream:
        assert stream.status_code == 200
        events = list(blocks(stream.iter_lines()))
    assert [e.get("event") for e in events] == [None, "state"]  # the opening comment, the end
    end = json.loads(events[1]["data"])
    assert (end["job"], end["state"]) == ("live", "ended")
    # A browser reconnects by itself with the last id it saw: told 204, it stops for good.
    again = served.client.get(
        "/api/v1/jobs/live/events", headers={"Last-Event-ID": events[1]["id"]}
    )
    assert again.status_code == 204 and again.content == b""
    other = served.client.get("/api/v1/jobs/live/events", headers={"Last-Event-ID": "x/1"})
    assert other.status_code == 200 and "event: state" in other.text


def test_a_failed_watch_ends_its_stream_with_the_failure(
    serve: ServeFactory, runs_dir: Path
) -> None:
    failing = tiny("failing").replace("cost_us = 50", "cost_us = 50\nfail = { after_s = 1.0 }")
    watches = Watches(facade.Settings(runs_dir=runs_dir), every_s=0.2)
    watches.start_scenario(parse_scenario(failing))
    served = serve(watches)
    with served.client.stream("GET", "/api/v1/jobs/failing/events") as stream:
        events = list(blocks(stream.iter_lines()))  # ends when the job fails
    states = [json.loads(e["data"]) for e in events if e.get("event") == "state"]
    assert [s["state"] for s in states] == ["failed"]
    assert events[-1].get("event") == "state"


def test_a_stored_job_is_said_to_be_only_stored_and_the_stream_ends(
    serve: ServeFactory, watches: Watches
) -> None:
    served = serve(watches)
    with served.client.stream("GET", "/api/v1/jobs/alpha/events") as stream:
        assert stream.status_code == 200
        events = list(blocks(stream.iter_lines()))
    end = events[-1]
    assert end["event"] == "state" and "not watched" in end[""]
    assert json.loads(end["data"])["state"] == "stored"
    assert httpx.get(f"{served.url}/api/v1/jobs/nobody/events").status_code == 404


def test_a_quiet_stream_is_kept_alive(serve: ServeFactory, runs_dir: Path) -> None:
    watches = Watches(facade.Settings(runs_dir=runs_dir), every_s=600)  # one burst, then quiet
    watches.start_scenario(parse_scenario(tiny("quiet")))
    wait_until(lambda: watches.running() == ["quiet"], "the watch to run")
    served = serve(watches)  # keep-alive every 0.5 s
    with served.client.stream("GET", "/api/v1/jobs/quiet/events") as stream:
        events = blocks(stream.iter_lines())
        next(events)
        assert next(e for e in events if e.get("event") != "report") == {"": "keep-alive"}


def test_the_stream_ends_when_the_server_stops(serve: ServeFactory, live: Watches) -> None:
    served = serve(live)
    opened = threading.Event()
    ended: list[str] = []

    def read() -> None:
        with served.client.stream("GET", "/api/v1/jobs/live/events") as stream:
            for _ in stream.iter_lines():
                opened.set()
        ended.append("cleanly")

    reader = threading.Thread(target=read)
    reader.start()
    assert opened.wait(WAIT_S)
    served.server.should_exit = True  # what Ctrl-C or SIGTERM sets
    reader.join(WAIT_S)
    served.thread.join(WAIT_S)
    assert ended == ["cleanly"] and not reader.is_alive() and not served.thread.is_alive()
    assert live.running() == []  # the app's shutdown stopped the watch


def test_a_slow_reader_loses_the_oldest_notices_never_holds_the_watch() -> None:
    woken: list[int] = []
    reader = Subscription("j", lambda: woken.append(1), limit=3)
    for burst in range(5):
        reader.push(Notice("j", "running", "r", burst))
    assert [n.burst for n in reader.take()] == [2, 3, 4]
    assert reader.dropped == 2 and len(woken) == 5
    assert reader.take() == []


def test_events_are_one_line_of_data_each() -> None:
    text = event_text(Notice("j\nk", "failed", "r"))
    assert text.startswith("id: r/failed\nevent: state\ndata: ") and text.endswith("\n\n")
    assert text.count("\n") == 4
