"""Server-sent events: one event per new report of a job, so a page updates as bursts land.

The stream opens with a comment (``: watching job NAME``), then sends for every report::

    id: <run_id>/<burst>
    event: report
    data: <the report document of docs/report.md, on one line>

and, when the watch ends or fails, one last event and the end of the stream::

    id: <run_id>/<state>
    event: state
    data: {"job": ..., "state": "ended" | "failed", "run_id": ...}

A stream opened on a watch that has ended already sends that event at once and ends; one opened
on a job this server does not watch (only its stored runs) says so with ``"state": "stored"`` and
ends. A browser reconnects to an ended stream on its own, sending the last ``id`` it saw as
``Last-Event-ID``: :func:`is_over` tells the endpoint to answer it 204, which per the SSE standard
stops the reconnecting. A comment keeps idle connections open every ``keepalive_s`` seconds.

Reports reach the stream from watch threads through a bounded
:class:`~bpmon.service.subscriptions.Subscription`; the stream waits on an asyncio event those
threads set through the loop, so no worker thread is held per client. It also ends when the client
goes away or the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool

from bpmon.model.report_json import report_to_json
from bpmon.service.subscriptions import Notice
from bpmon.service.watching import JobView, Watches

KEEPALIVE_S = 15.0
"""Seconds between keep-alive comments on a quiet stream."""
RETRY_MS = 3000
"""How long a browser waits before it reconnects a dropped stream."""


async def job_events(watches: Watches, job: str, keepalive_s: float) -> AsyncIterator[str]:
    """The event stream of ``job`` until the client leaves or the server stops."""
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()

    def wake() -> None:  # called on watch threads
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening
            loop.call_soon_threadsafe(ready.set)

    reader = watches.subscribers.subscribe(job, wake)
    try:
        yield f"retry: {RETRY_MS}\n: watching job {json.dumps(job)}\n\n"
        # Read after subscribing: a watch ending now is seen here, or as a notice below.
        view = await run_in_threadpool(watches.job, job)
        if view is None or view.state != "running":
            if view is not None:
                yield final_text(view)
            return
        while True:
            ready.clear()
            for notice in reader.take():
                yield event_text(notice)
                if notice.report is None and notice.state != "running":
                    return  # the watch ended: nothing more will come
            if reader.closed:
                return
            try:
                await asyncio.wait_for(ready.wait(), keepalive_s)
            except TimeoutError:
                yield ": keep-alive\n\n"
    finally:
        watches.subscribers.unsubscribe(reader)


def event_text(notice: Notice) -> str:
    """One notice as an SSE event: ``report`` with the report, or ``state`` when a watch ends."""
    if notice.report is not None:
        data = report_to_json(notice.report, indent=None)
        return f"id: {notice.run_id}/{notice.burst}\nevent: report\ndata: {data}\n\n"
    state = {"job": notice.job, "state": notice.state, "run_id": notice.run_id}
    event_id = last_id(notice.run_id, notice.state)
    return f"id: {event_id}\nevent: state\ndata: {json.dumps(state)}\n\n"


def final_text(view: JobView) -> str:
    """The last event of a job that is not running: how its watch ended, or that it is stored."""
    said = ": not watched by this server, only stored\n" if view.state == "stored" else ""
    return said + event_text(Notice(view.job, view.state, view.run_id or ""))


def last_id(run_id: str, state: str) -> str:
    """The ``id`` of a job's last event: its run and how the watch ended."""
    return " ".join(f"{run_id}/{state}".splitlines())  # an id is one line


def is_over(view: JobView, last_event_id: str | None) -> bool:
    """Whether a client reconnecting with ``last_event_id`` has seen the job's last event."""
    return (
        view.state != "running"
        and last_event_id is not None
        and last_event_id == last_id(view.run_id or "", view.state)
    )
