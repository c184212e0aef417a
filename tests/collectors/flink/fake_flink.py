"""A real HTTP server that answers like a Flink JobManager, from documents the test gives it.

Used where the real cluster cannot easily be made to misbehave: an older Flink's metric names,
an address that answers HTTP but is not Flink, an HTTP 503 or a timeout at a chosen moment, a
job state at a chosen moment. Only the HTTP layer is stood in for; bpmon's client, parsing and
errors run as they do against a real cluster.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).with_name("fixtures")

Answer = tuple[int, Any]
"""(HTTP status, JSON document or raw text)."""

Routes = Mapping[str, Answer]
"""Path -> answer. The query is ignored, except that a request with ``get=`` is answered from
``PATH?get`` when there is one (metric values, not the list)."""


def recorded(folder: str) -> dict[str, Answer]:
    """The routes of a recording of a real cluster (``fixtures/FOLDER``, by ``record.py``)."""
    base = FIXTURES / folder
    routes: dict[str, str] = json.loads((base / "routes.json").read_text())
    return {path: (200, json.loads((base / name).read_text())) for path, name in routes.items()}


def job_id(routes: Mapping[str, Answer]) -> str:
    """The id of the (only) job of recorded ``routes``."""
    return str(routes["/jobs/overview"][1]["jobs"][0]["jid"])


@dataclass
class Script:
    """What a :func:`serving` server answers, changeable while it serves.

    ``routes``: path -> answer (replace entries, or all of them, at any time). ``queued``: path
    -> answers given in turn before ``routes``' (an HTTP 503 twice, then the route). ``delay_s``:
    path -> seconds to wait before answering (a timeout). ``log``: every path requested.
    """

    routes: MutableMapping[str, Answer]
    queued: dict[str, list[Answer]] = field(default_factory=dict)
    delay_s: dict[str, float] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, path: str, query: str) -> tuple[Answer, float]:
        """The answer to ``path?query`` and how long to wait before giving it."""
        key = f"{path}?get" if "get=" in query and f"{path}?get" in self.routes else path
        with self.lock:
            self.log.append(path)
            waiting = self.queued.get(path)
            answer = waiting.pop(0) if waiting else None
        found = answer or self.routes.get(key, (404, {"errors": ["Not found"]}))
        return found, self.delay_s.get(path, 0.0)

    def count(self, suffix: str) -> int:
        """How many requests were for a path ending with ``suffix``."""
        with self.lock:
            return sum(1 for p in self.log if p.endswith(suffix))


@contextmanager
def serving(routes: Routes | Script) -> Iterator[str]:
    """Serve ``routes`` (or a :class:`Script`) on a free loopback port; yields the base URL.
    Unknown paths are 404."""
    script = routes if isinstance(routes, Script) else Script(dict(routes))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            (status, body), delay = script.answer(path, query)
            if delay:
                time.sleep(delay)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up waiting (a timeout test)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
