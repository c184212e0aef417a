"""A real three-stage threaded pipeline connected by bounded ``queue.Queue``s (the py-spy target).

``ingest-0`` produces items as fast as it can into a small queue, ``transform-0`` and
``transform-1`` do a little work each and pass items on, and ``upload-0`` is slow: it spends
``--upload-ms`` per item in ``time.sleep`` (an external system). So upload is the bottleneck
(busy), and transform and ingest spend nearly all their time blocked in ``Queue.put`` on a full
queue (backpressured). The main thread keeps the program alive (``--keeper``): it waits on an
event (``event``, the default: idle), sleeps in a loop (``sleep``: it looks busy, as ``time.sleep``
is work for a stage, yet it never touches a queue), or joins a stage with a timeout (``join``).

Run: ``python queue_pipeline.py [--seconds 30] [--upload-ms 5] [--keeper event|sleep|join]``; it
prints ``ready`` once every stage thread runs, and exits by itself after ``--seconds``.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time

_STOP = object()


def _ingest(out: queue.Queue[object], stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        out.put(n)
        n += 1


def _transform(inp: queue.Queue[object], out: queue.Queue[object]) -> None:
    while True:
        item = inp.get()
        out.put(("t", item))


def _upload(inp: queue.Queue[object], upload_s: float) -> None:
    while True:
        inp.get()
        time.sleep(upload_s)


def main() -> None:
    """Start the stages, print ``ready``, run for ``--seconds``, then exit."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--upload-ms", type=float, default=5.0)
    parser.add_argument("--keeper", choices=("event", "sleep", "join"), default="event")
    args = parser.parse_args()
    stop = threading.Event()
    raw: queue.Queue[object] = queue.Queue(maxsize=8)
    transformed: queue.Queue[object] = queue.Queue(maxsize=8)
    threads = [
        threading.Thread(target=_ingest, args=(raw, stop), name="ingest-0", daemon=True),
        *(
            threading.Thread(
                target=_transform, args=(raw, transformed), name=f"transform-{i}", daemon=True
            )
            for i in range(2)
        ),
        threading.Thread(
            target=_upload, args=(transformed, args.upload_ms / 1000), name="upload-0", daemon=True
        ),
    ]
    for thread in threads:
        thread.start()
    print("ready", flush=True)
    _keep_alive(args.keeper, args.seconds, stop, threads[-1])
    stop.set()


def _keep_alive(how: str, seconds: float, stop: threading.Event, stage: threading.Thread) -> None:
    """Keep the main thread (and so the program) alive for ``seconds``, the way ``how`` says."""
    if how == "sleep":
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.2)
    elif how == "join":
        stage.join(seconds)  # the upload stage never ends: this waits the whole time
    else:
        stop.wait(seconds)


if __name__ == "__main__":
    main()
