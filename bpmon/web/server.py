"""Running the app under uvicorn: the listening socket, TLS, the shutdown order and the signals.

The socket is bound here before uvicorn starts, so a port in use is one line and exit code 2,
and ``--port 0`` picks a free port that is then announced. On Ctrl-C or SIGTERM uvicorn stops
accepting, :class:`BpmonServer` ends every event stream (uvicorn would otherwise wait for those
connections forever), uvicorn waits GRACEFUL_S at most for the requests still open, and the app's
lifespan then stops every watched job in the time left; the caller learns what did not end
cleanly from :meth:`bpmon.service.watching.Watches.stop_all`. The whole stop is timed from the first
signal and forced past :data:`bpmon.web.stopping.FORCE_S` (:mod:`bpmon.web.stopping`).
"""

from __future__ import annotations

import socket
from types import FrameType

import uvicorn
from fastapi import FastAPI

from bpmon.model.errors import ConfigError
from bpmon.service.watching import Watches
from bpmon.web.stopping import Stopping
from bpmon.web.tls import TlsFiles

GRACEFUL_S = 2
"""The longest uvicorn waits for open requests once the server stops (event streams end at once);
the watches then have what is left of the stop's FORCE_S."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0 picks a free port).

    Raises:
        ConfigError: the address cannot be used (in use, not this machine's, bad port).
    """
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port}: expected 0..65535 (0 picks a free port)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"--host {host}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {(exc.strerror or str(exc)).lower()}; "
            "choose another --port or --host"
        ) from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, *, tls: bool = False) -> str:
    """``http://host:port`` (``https://`` with ``tls``) of a bound socket (IPv6 in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


class BpmonServer(uvicorn.Server):
    """uvicorn's server, ending bpmon's event streams as soon as it starts shutting down.

    Ctrl-C and SIGTERM go to ``stopping`` (the first one times the stop, a second one forces the
    exit), never re-raised once the server has stopped: a stop by signal returns normally.
    """

    def __init__(
        self, config: uvicorn.Config, watches: Watches, stopping: Stopping | None = None
    ) -> None:
        super().__init__(config)
        self.watches = watches
        self.stopping = stopping if stopping is not None else Stopping()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's signal handler: stop serving, the stop timed by ``stopping``."""
        if self.stopping.signalled():
            self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End every event stream first, so no open connection holds the shutdown up."""
        self.watches.close_streams()
        await super().shutdown(sockets=sockets)


def make_server(
    app: FastAPI,
    watches: Watches,
    *,
    stopping: Stopping | None = None,
    tls: TlsFiles | None = None,
) -> BpmonServer:
    """A quiet uvicorn server for ``app`` (warnings and errors only, no access log), HTTPS
    with ``tls``."""
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_S,
        server_header=False,
        ssl_certfile=None if tls is None else str(tls.certfile),
        ssl_keyfile=None if tls is None else str(tls.keyfile),
    )
    return BpmonServer(config, watches, stopping)


def run(server: BpmonServer, sock: socket.socket) -> None:
    """Serve on ``sock`` until Ctrl-C or SIGTERM (or ``server.should_exit``), then return."""
    server.run(sockets=[sock])
