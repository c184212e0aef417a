"""The FastAPI application of ``bpmon serve``: the API, Flink's endpoint, /metrics, /healthz.

:func:`create_app` builds it around a :class:`~bpmon.watching.Watches` registry, which it owns
from then on: when the app shuts down, every watch is stopped. The Prometheus registry is built
once here, over the registry's ``latest`` and ``counters``; a scrape only renders it.

Every error a client can cause is a JSON body ``{"detail": "<one line>"}`` with a 4xx status
(Flink's endpoint uses Flink's ``{"errors": [...]}``): a bpmon error by its kind (bad input 400,
unknown 404, a watch already running 409, an unreadable stored report 422), a malformed request
422 naming the field.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

import bpmon
from bpmon.errors import BpmonError, ConfigError, HistoryError, TargetNotFoundError
from bpmon.prometheus import CONTENT_TYPE, exposition, make_registry
from bpmon.watching import AlreadyWatchedError, Watches
from bpmon.web import api, flink, pages
from bpmon.web.auth import BearerAuth
from bpmon.web.login import TokenCookie
from bpmon.web.runs import CORRUPT_STATUS, public_message
from bpmon.web.stream import KEEPALIVE_S

PUBLIC_PATHS = ("/healthz",)
"""Served without a token: a health check reveals nothing."""


def create_app(
    watches: Watches,
    *,
    token: str | None = None,
    metrics_public: bool = False,
    keepalive_s: float = KEEPALIVE_S,
) -> FastAPI:
    """The server's app over ``watches``.

    Args:
        watches: the jobs to serve; stopped when the app shuts down.
        token: when set, every request but ``/healthz`` needs ``Authorization: Bearer token``.
        metrics_public: serve ``/metrics`` without the token (Prometheus scrapes it).
        keepalive_s: seconds between keep-alive comments on a quiet event stream.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(watches.stop_all)

    app = FastAPI(
        title="bpmon",
        version=bpmon.__version__,
        summary="Backpressure diagnoses of watched and stored streaming jobs.",
        lifespan=lifespan,
    )
    app.state.watches = watches
    app.state.keepalive_s = keepalive_s
    app.include_router(api.router)
    app.include_router(flink.router)
    pages.mount(app)  # the dashboard (bpmon.web.pages)
    _add_endpoints(app, watches)
    _add_error_handlers(app, watches)
    if token is not None:
        public = (*PUBLIC_PATHS, "/metrics") if metrics_public else PUBLIC_PATHS
        app.add_middleware(BearerAuth, token=token, public=public)
        app.add_middleware(TokenCookie, token=token)  # browsers sign in once (bpmon.web.login)
    return app


def _add_endpoints(app: FastAPI, watches: Watches) -> None:
    registry = make_registry(watches.latest, watches.counters)

    @app.get("/healthz", tags=["server"], summary="Is the server up")
    async def healthz() -> dict[str, object]:
        """``ok``, the version and the jobs being watched (never touches the disk)."""
        return {"status": "ok", "version": bpmon.__version__, "watching": watches.running()}

    @app.get(
        "/metrics",
        tags=["server"],
        summary="Prometheus metrics of every job's latest report",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}}},
    )
    def metrics() -> Response:
        """The Prometheus text format (README: "Prometheus and Grafana")."""
        return Response(exposition(registry), headers={"Content-Type": CONTENT_TYPE})


def _add_error_handlers(app: FastAPI, watches: Watches) -> None:
    @app.exception_handler(BpmonError)
    async def bpmon_error(request: Request, exc: BpmonError) -> JSONResponse:
        message = public_message(str(exc), watches.settings)
        return JSONResponse({"detail": message}, status_code=_status_of(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error.get("loc", ()))
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
        return JSONResponse({"detail": "; ".join(problems) or "invalid request"}, status_code=422)


def _status_of(exc: BpmonError) -> int:
    if isinstance(exc, AlreadyWatchedError):
        return 409
    if isinstance(exc, ConfigError):
        return 400
    if isinstance(exc, TargetNotFoundError):
        return 404
    if isinstance(exc, HistoryError):
        return CORRUPT_STATUS
    return 500
