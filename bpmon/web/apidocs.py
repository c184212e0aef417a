"""The API's documentation pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), with no CDN.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so on a cluster without internet they
are blank. Here the same pages (FastAPI's :func:`get_swagger_ui_html` and :func:`get_redoc_html`)
point at this server: the JavaScript and CSS come from the ``fastapi-offline`` package the web
extra installs (MIT; it ships Swagger UI, Apache-2.0, and ReDoc, MIT, as built by their authors),
served from where pip put them, never copied into bpmon. Their URLs carry that package's version,
so browsers keep them for a year and fetch them again after an upgrade. ReDoc is told not to load
Google's fonts, and a Content-Security-Policy makes the browser refuse anything from elsewhere
(ReDoc's footer logo, which it would fetch from its CDN, is left out).
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

from bpmon.model.errors import ConfigError
from bpmon.web.shell import FOREVER

ASSETS_PACKAGE = "fastapi_offline"
"""The installed package whose ``static/`` folder holds Swagger UI's and ReDoc's files."""
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
"""The only files served from it, with their media types."""
POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",  # FastAPI's pages start the UI in an inline script
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",  # ReDoc's footer logo would come from its CDN: not loaded
        "worker-src 'self' blob:",
        "frame-ancestors 'none'",
    ]
)
"""The pages' Content-Security-Policy: the browser itself refuses anything from elsewhere."""

router = APIRouter(include_in_schema=False)


def mount(app: FastAPI) -> None:
    """Add ``/docs``, ``/redoc`` and their files to ``app`` (made with ``docs_url=None`` and
    ``redoc_url=None``, so FastAPI's CDN pages are not there)."""
    app.include_router(router)


def check_assets() -> None:
    """Fail at start, not on the first visit of ``/docs``, when the files are not installed.

    Raises:
        ConfigError: ``fastapi-offline`` is missing (a web extra installed by an older bpmon).
    """
    try:
        assets_version()
        files(ASSETS_PACKAGE)
    except (PackageNotFoundError, ModuleNotFoundError):
        raise ConfigError(
            "bpmon serve needs the web extra (fastapi-offline is missing): pip install 'bpmon[web]'"
        ) from None


@cache
def assets_version() -> str:
    """The version of the package the files come from: their URLs change when it does."""
    return version(ASSETS_PACKAGE.replace("_", "-"))


def asset_url(name: str) -> str:
    """Where this server serves one of the ASSET_TYPES files."""
    return f"/docs/assets/{assets_version()}/{name}"


@cache
def _asset(name: str) -> bytes:
    return files(ASSETS_PACKAGE).joinpath("static", name).read_bytes()


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI over ``/openapi.json``: every operation, tried from the page."""
    return _local_only(
        get_swagger_ui_html(
            openapi_url=request.app.openapi_url,
            title=f"{request.app.title} API",
            swagger_js_url=asset_url("swagger-ui-bundle.js"),
            swagger_css_url=asset_url("swagger-ui.css"),
            swagger_favicon_url=asset_url("favicon.png"),
        )
    )


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    """ReDoc over ``/openapi.json``: the API as one reference page."""
    return _local_only(
        get_redoc_html(
            openapi_url=request.app.openapi_url,
            title=f"{request.app.title} API reference",
            redoc_js_url=asset_url("redoc.standalone.js"),
            redoc_favicon_url=asset_url("favicon.png"),
            with_google_fonts=False,
        )
    )


def _local_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


@router.get("/docs/assets/{release}/{name}")
def asset(release: str, name: str) -> Response:
    """One file of Swagger UI or ReDoc, cached for a year (its URL names the release)."""
    if name not in ASSET_TYPES or release != assets_version():
        raise HTTPException(404, f"no documentation file {name[:80]!r}; /docs links its own")
    return Response(_asset(name), media_type=ASSET_TYPES[name], headers={"Cache-Control": FOREVER})
