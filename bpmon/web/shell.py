"""The frame of every dashboard page, and the files it loads: the stylesheet, the script, plotly.js.

Pages are rendered on the server from Jinja2 templates that extend ``templates/base.html``, with
autoescaping on (:mod:`bpmon.web.templating`). plotly.js comes from the
installed plotly package, never from a CDN: the dashboard runs on clusters without internet. Its
URL carries plotly.js's version, the stylesheet's and the script's a hash of their content, so
browsers keep them for a year (``immutable``) and fetch them again only when they change. plotly.js
is 4.8 MB; it is gzipped once, on first request, for browsers that accept gzip (about 1.4 MB).
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from functools import cache
from importlib.resources import files
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

import bpmon
from bpmon.web.templating import render

router = APIRouter(include_in_schema=False)

NAV = (
    ("/", "Jobs", "jobs"),
    ("/history", "History", "history"),
    ("/compare", "Compare", "compare"),
)
STATIC_TYPES = {"dashboard.css": "text/css; charset=utf-8"}
STATIC_TYPES["dashboard.js"] = "text/javascript; charset=utf-8"
FOREVER = "public, max-age=31536000, immutable"


@cache
def static_file(name: str) -> bytes:
    """A file of ``bpmon/web/static`` (read once)."""
    return files("bpmon.web").joinpath("static", name).read_bytes()


@cache
def version_of(name: str) -> str:
    """A short hash of a static file's content: its URL changes when it does."""
    return hashlib.sha256(static_file(name)).hexdigest()[:12]


@cache
def plotly_name() -> str:
    """plotly.js's file name on this server, with its version (``plotly-3.1.1.min.js``)."""
    from plotly.offline import get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js"


_gzip_lock = threading.Lock()


@cache
def _plotly_bytes() -> bytes:
    return files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()


@cache
def _plotly_gzip() -> bytes:
    with _gzip_lock:
        return gzip.compress(_plotly_bytes(), compresslevel=6, mtime=0)


def page(
    template: str,
    title: str,
    name: str,
    *,
    plotly: bool = False,
    attributes: dict[str, str] | None = None,
    status: int = 200,
    **values: Any,
) -> HTMLResponse:
    """A whole page: ``template`` (which extends ``base.html``) rendered with ``values``.

    Args:
        template: the page's template in ``bpmon/web/templates``.
        title: the page's title (plain text).
        name: which page (``jobs``, ``job``, ``run``, ``compare``, ``history``): the nav marks it
            and the script reads it from ``<body data-page>``.
        plotly: load plotly.js (pages without a figure skip its 4.8 MB).
        attributes: more ``data-*`` attributes of ``<body>``.
        status: the HTTP status.
        values: what the page's template shows.
    """
    text = render(
        template,
        title=title,
        page=name,
        attributes=attributes or {},
        nav=NAV,
        plotly=plotly,
        plotly_name=plotly_name() if plotly else "",
        css_version=version_of("dashboard.css"),
        js_version=version_of("dashboard.js"),
        version=bpmon.__version__,
        **values,
    )
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    return HTMLResponse(text, status_code=status, headers=headers)


def error_page(status: int, message: str) -> HTMLResponse:
    """A page saying what went wrong in one line, with the way back."""
    return page(
        "error.html", "Error", "error", status=status, message=message, not_found=status == 404
    )


@router.get("/static/{name}")
def static(name: str, request: Request) -> Response:
    """The stylesheet, the script, or plotly.js; cached for a year (the URL is versioned)."""
    if name == plotly_name():
        etag = f'"{name}"'
        if "gzip" in request.headers.get("accept-encoding", ""):
            body, extra = _plotly_gzip(), {"Content-Encoding": "gzip"}
        else:
            body, extra = _plotly_bytes(), {}
        kind = "text/javascript; charset=utf-8"
    elif name in STATIC_TYPES:
        body, extra, kind = static_file(name), {}, STATIC_TYPES[name]
        etag = f'"{version_of(name)}"'
    else:
        raise HTTPException(404, f"no static file {name[:80]!r}")
    headers = {"Cache-Control": FOREVER, "ETag": etag, "Vary": "Accept-Encoding", **extra}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag, "Cache-Control": FOREVER})
    return Response(body, media_type=kind, headers=headers)
