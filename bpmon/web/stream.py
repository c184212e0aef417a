"""Server-sent events: one event per new report of a job, so a page updates as bursts land.

The stream opens with a comment (``: watching job NAME``), then sends for every report::

    id: <run_id>/<burst>
    event: report
    data: <the report document of spec/report.md, on one line>

and ``event: state`` (``{"job", "state", "run_id"}``) when the watch ends or fails. A comment
keeps idle connections open every ``keepalive_s`` seconds. Reports reach the stream from watch
threads through a bounded :class:`~bpmon.subscriptions.Subscription`; the stream waits on an asyncio
event those threads set through the loop, so no worker thread is held per client. It ends when
the client goes away or the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from bpmon.report_json import report_to_json
from bpmon.subscriptions import Notice
from bpmon.watching import Watches

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
        while True:
            ready.clear()
            for notice in reader.take():
                yield event_text(notice)
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
    return f"event: state\ndata: {json.dumps(state)}\n\n"
