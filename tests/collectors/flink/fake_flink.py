"""A real HTTP server that answers like a Flink JobManager, from documents the test gives it.

Used where the real cluster cannot easily be made to misbehave: an older Flink's metric names,
an address that answers HTTP but is not Flink. Only the HTTP layer is stood in for; bpmon's
client, parsing and errors run as they do against a real cluster.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Routes = Mapping[str, tuple[int, Any]]
"""Path -> (HTTP status, JSON document or raw text). The query is ignored, except that a request
with ``get=`` is answered from ``PATH?get`` when there is one (metric values, not the list)."""


@contextmanager
def serving(routes: Routes) -> Iterator[str]:
    """Serve ``routes`` on a free loopback port; yields the base URL. Unknown paths are 404."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            key = f"{path}?get" if "get=" in query and f"{path}?get" in routes else path
            status, body = routes.get(key, (404, {"errors": ["Not found"]}))
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
