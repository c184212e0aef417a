"""Running the app under uvicorn: the listening socket, the shutdown order and the signals.

The socket is bound here before uvicorn starts, so a port in use is one line and exit code 2,
and ``--port 0`` picks a free port that is then announced. On Ctrl-C or SIGTERM uvicorn stops
accepting, :class:`BpmonServer` ends every event stream (uvicorn would otherwise wait for those
connections forever), and the app's lifespan then stops every watched job; the caller learns
what did not end cleanly from :meth:`bpmon.watching.Watches.stop_all`.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn
from fastapi import FastAPI

from bpmon.errors import ConfigError
from bpmon.watching import Watches

GRACEFUL_S = 5
"""The longest uvicorn waits for open requests once the server stops."""


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


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class BpmonServer(uvicorn.Server):
    """uvicorn's server, ending bpmon's event streams as soon as it starts shutting down."""

    def __init__(self, config: uvicorn.Config, watches: Watches) -> None:
        super().__init__(config)
        self.watches = watches

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End every event stream first, so no open connection holds the shutdown up."""
        self.watches.close_streams()
        await super().shutdown(sockets=sockets)


def make_server(app: FastAPI, watches: Watches) -> BpmonServer:
    """A quiet uvicorn server for ``app`` (warnings and errors only, no access log)."""
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_S,
        server_header=False,
    )
    return BpmonServer(config, watches)


def run(server: BpmonServer, sock: socket.socket) -> None:
    """Serve on ``sock`` until Ctrl-C or SIGTERM (or ``server.should_exit``), then return.

    uvicorn handles both signals while it runs and raises them again once it has stopped; they
    are absorbed here, so a stop by signal returns normally and the caller exits 0.
    """
    with _absorbed_signals():
        server.run(sockets=[sock])


@contextmanager
def interruptible() -> Iterator[None]:
    """Let SIGTERM interrupt like Ctrl-C (KeyboardInterrupt) while watches start up."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _absorbed_signals() -> Iterator[None]:
    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, _absorb) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _absorb(signum: int, frame: FrameType | None) -> None:
    """The signal was handled already: the server stopped because of it."""
