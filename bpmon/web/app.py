"""The FastAPI application of ``bpmon serve``: the API, Flink's endpoint, /metrics, /healthz.

:func:`create_app` builds it around a :class:`~bpmon.service.watching.Watches` registry, which it
owns from then on: when the app shuts down, every watch is stopped, in the time the stop has left
(:mod:`bpmon.web.stopping`). The Prometheus registry is built once here, over the registry's
``latest`` and ``counters``; a scrape only renders it. In front of every route, outermost first: the
``Host`` check (:mod:`bpmon.web.hosts`), then with a token the sign-in cookie
(:mod:`bpmon.web.login`) and the token check (:mod:`bpmon.web.auth`).

``/healthz`` answers 200 while every watch keeps to its plan and 503 when one is stuck (a burst
far past its plan, :meth:`~bpmon.service.watching.Watches.stuck`). It never touches the disk, needs
no token, and names the watched and stuck jobs only to a caller that may see them (no token set, or
the token shown); anyone else gets their counts.

Every error a client can cause is a JSON body ``{"detail": "<one line>"}`` with a 4xx status
(Flink's endpoint uses Flink's ``{"errors": [...]}``): a bpmon error by its kind (bad input 400,
unknown 404, a watch already running 409, an unreadable stored report 422), a malformed request
422 naming the field.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

import bpmon
from bpmon.model.errors import BpmonError, ConfigError, HistoryError, TargetNotFoundError
from bpmon.prometheus import CONTENT_TYPE, exposition, make_registry
from bpmon.service.watching import AlreadyWatchedError, Watches
from bpmon.web import api, apidocs, flink, pages
from bpmon.web.auth import AUTHORIZED, BearerAuth
from bpmon.web.hosts import HostAllowList
from bpmon.web.login import TokenCookie
from bpmon.web.runs import CORRUPT_STATUS, public_message
from bpmon.web.schemas import Health
from bpmon.web.stopping import Stopping, on_own_thread
from bpmon.web.stream import KEEPALIVE_S

PUBLIC_PATHS = ("/healthz",)
"""Served without a token: a health check reveals nothing."""


def create_app(
    watches: Watches,
    *,
    token: str | None = None,
    metrics_public: bool = False,
    keepalive_s: float = KEEPALIVE_S,
    allow_hosts: Collection[str] | None = (),
    secure_cookie: bool = False,
    stopping: Stopping | None = None,
) -> FastAPI:
    """The server's app over ``watches``.

    Args:
        watches: the jobs to serve; stopped when the app shuts down.
        token: when set, every request but ``/healthz`` needs ``Authorization: Bearer token``.
        metrics_public: serve ``/metrics`` without the token (Prometheus scrapes it).
        keepalive_s: seconds between keep-alive comments on a quiet event stream.
        allow_hosts: the ``Host`` names answered besides loopback (None: any).
        secure_cookie: the sign-in cookie is ``Secure`` (the server speaks HTTPS).
        stopping: the server's stop, whose time left bounds stopping the watches.
    """
    stop = stopping if stopping is not None else Stopping()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await on_own_thread(lambda: watches.stop_all(deadline_s=stop.left()))

    app = FastAPI(
        title="bpmon",
        version=bpmon.__version__,
        summary="Backpressure diagnoses of watched and stored streaming jobs.",
        lifespan=lifespan,
        docs_url=None,  # served without a CDN by bpmon.web.apidocs
        redoc_url=None,
    )
    app.state.watches = watches
    app.state.keepalive_s = keepalive_s
    app.include_router(api.router)
    app.include_router(flink.router)
    pages.mount(app)  # the dashboard (bpmon.web.pages)
    apidocs.mount(app)
    _add_endpoints(app, watches, open_to_all=token is None)
    _add_error_handlers(app, watches)
    if token is not None:
        public = (*PUBLIC_PATHS, "/metrics") if metrics_public else PUBLIC_PATHS
        app.add_middleware(BearerAuth, token=token, public=public)
        # browsers sign in once (bpmon.web.login)
        app.add_middleware(TokenCookie, token=token, secure=secure_cookie)
    app.add_middleware(HostAllowList, names=allow_hosts)  # added last: checked first
    return app


def _add_endpoints(app: FastAPI, watches: Watches, *, open_to_all: bool) -> None:
    registry = make_registry(watches.latest, watches.counters)

    @app.get(
        "/healthz",
        tags=["server"],
        summary="Is the server up, and is every watch keeping to its plan",
        response_model=Health,
        responses={
            503: {"model": Health, "description": "A watch is stuck: a burst far past its plan."}
        },
    )
    async def healthz(request: Request) -> JSONResponse:
        """``ok`` (200) or ``stuck`` (503), the version, and how many jobs are watched and stuck;
        for a caller with the token (or when the server has none) also their names, each stuck
        one with why (``"job: no sign of life for 61 s"``). Never touches the disk."""
        running, stuck = watches.running(), watches.stuck()
        doc: dict[str, object] = {
            "status": "stuck" if stuck else "ok",
            "version": bpmon.__version__,
            "watches": len(running),
            "stuck": len(stuck),
        }
        if open_to_all or request.scope.get(AUTHORIZED) is True:
            doc |= {"watching": running, "stuck_watches": stuck}
        return JSONResponse(doc, status_code=503 if stuck else 200)

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
