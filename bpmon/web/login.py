"""Signing a browser in to a server that has a token: a form, then a cookie the token check reads.

A browser cannot add ``Authorization: Bearer`` to a page it navigates to, so with a token the
dashboard asks for it once at ``/login`` and keeps it in an ``HttpOnly``, ``SameSite=Strict``
cookie, ``Secure`` too when the server speaks HTTPS (``--certfile``), so a browser never sends
it over plain HTTP. :class:`TokenCookie` sits in front of :class:`~bpmon.web.auth.BearerAuth` and
hands the cookie's token to it as the header, so the check (in constant time) is the API's own;
a page request that check refuses is sent to the sign-in form instead of a JSON 401. Other sites
cannot use the cookie (``SameSite=Strict``), and API clients keep sending the header.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs, quote, unquote

from starlette.datastructures import Headers
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bpmon.web.templating import render

COOKIE = "bpmon_token"
LOGIN = "/login"
LOGOUT = "/logout"
MAX_FORM_BYTES = 4096
WRONG = "That is not this server's token."


class TokenCookie:
    """ASGI middleware: the sign-in form, the cookie as a bearer token, pages sent to sign in.

    Args:
        app: the application behind it (BearerAuth in front of the routes).
        token: the server's token.
        secure: mark the cookie ``Secure`` (the server speaks HTTPS).
    """

    def __init__(self, app: ASGIApp, token: str, *, secure: bool = False) -> None:
        self.app = app
        self._token = token.encode("utf-8")
        self._secure = secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == LOGIN:
            response = await self._login(scope, receive)
            await response(scope, receive, send)
            return
        if path == LOGOUT:
            response = RedirectResponse(LOGIN, status_code=303)
            response.delete_cookie(
                COOKIE, path="/", secure=self._secure, httponly=True, samesite="strict"
            )
            await response(scope, receive, send)
            return
        headers = Headers(scope=scope)
        token = _cookie(headers.get("cookie", ""))
        if token and "authorization" not in headers:
            extra = (b"authorization", b"Bearer " + token.encode("utf-8", "replace"))
            scope = {**scope, "headers": [*scope["headers"], extra]}
        if scope["method"] == "GET" and "text/html" in headers.get("accept", ""):
            send = _to_login(send, path, scope.get("query_string", b""))
        await self.app(scope, receive, send)

    async def _login(self, scope: Scope, receive: Receive) -> Response:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        target = _local(query.get("next", ["/"])[0])
        if scope["method"] != "POST":
            return _form(target, "")
        form = parse_qs((await _body(receive)).decode("utf-8", "replace"))
        target = _local(form.get("next", [target])[0])
        given = form.get("token", [""])[0].strip().encode("utf-8")
        if not hmac.compare_digest(given, self._token):
            return _form(target, WRONG, status=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE,
            quote(given, safe=""),
            httponly=True,
            samesite="strict",
            secure=self._secure,
            path="/",
        )
        return response


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return unquote(value)
    return None


def _local(target: str) -> str:
    """A path on this server only (never ``//host`` or a scheme): where to go after signing in."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _form(target: str, problem: str, status: int = 200) -> HTMLResponse:
    text = render("login.html", next=target, problem=problem)
    return HTMLResponse(text, status_code=status, headers={"Cache-Control": "no-store"})


async def _body(receive: Receive) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return b""
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _to_login(send: Send, path: str, query: bytes) -> Send:
    """``send``, except that a 401 becomes a redirect to the sign-in form (for page requests)."""
    swallowing = False
    back = path + ("?" + query.decode("latin-1") if query else "")

    async def wrapped(message: Message) -> None:
        nonlocal swallowing
        if message["type"] == "http.response.start" and message["status"] == 401:
            swallowing = True
            location = f"{LOGIN}?next={quote(back, safe='/')}"
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", location.encode("latin-1")),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if swallowing:
            return
        await send(message)

    return wrapped
