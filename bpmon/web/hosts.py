"""Which ``Host`` a request may name: the defence of a loopback server against DNS rebinding.

A web page on another site cannot read a loopback server's answers: the browser's same-origin
rule forbids it. DNS rebinding gets round that rule: the attacker's name first resolves to the
attacker's server, which serves the page, then to 127.0.0.1, so the page's requests reach bpmon
while the browser still sees the attacker's origin. What gives it away is the ``Host`` header,
which names the attacker's domain. :class:`HostAllowList` refuses such a request before any route
sees it (HTTP 421, one line of JSON naming ``--allow-host``).

Always allowed: ``localhost`` and every loopback address (``127.0.0.1``, ``[::1]``...), with any
port. :func:`allowed_names` adds the address the server is bound to and the ``--allow-host``
names (the DNS name Prometheus scrapes, say). A server bound to every address (``0.0.0.0``,
``::``) has a token (:func:`bpmon.web.auth.check_exposure`) and no single name to check against:
it accepts any ``Host`` unless ``--allow-host`` is given, because the token already guards every
request but the public ones, and the sign-in cookie is ``SameSite=Strict`` and kept per name, so a
rebound page cannot use it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from bpmon.model.errors import ConfigError

MISDIRECTED = 421
"""HTTP 421 Misdirected Request: this server does not answer for that name."""
SHOWN_CHARS = 80
"""The most of a refused ``Host`` quoted back."""
WILDCARDS = frozenset({"0.0.0.0", "::"})


def host_of(header: str) -> str:
    """The host of a ``Host`` header, without its port, lower case, an IP in its canonical form.

    ``"LocalHost:8484"`` → ``"localhost"``; ``"[0:0::1]:80"`` → ``"::1"``; ``"a.example."`` →
    ``"a.example"`` (a trailing dot names the same host).
    """
    text = header.strip().lower()
    if text.startswith("["):
        inside, bracket, _ = text[1:].partition("]")
        text = inside if bracket else text
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    return normal(text)


def normal(name: str) -> str:
    """A host name lower case without a trailing dot, an IP address in canonical form."""
    name = name.strip().lower().strip("[]").rstrip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def is_local(host: str) -> bool:
    """True for ``localhost`` and any loopback address (already :func:`normal`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_allow_host(name: str) -> str:
    """A ``--allow-host`` value, normalised.

    Raises:
        ConfigError: empty, or with a scheme, a path, a port or a space.
    """
    bare = name.strip()
    shown = normal(bare)
    if (
        not shown
        or any(c.isspace() or c in "/@?#" for c in bare)
        or (":" in shown and not _is_ip(shown))
    ):
        raise ConfigError(
            f"--allow-host {name!r}: expected a host name or address as clients type it in the "
            "URL, without scheme or port (e.g. --allow-host bpmon.example.org)"
        )
    return shown


def allowed_names(
    bound: Iterable[str], extra: Collection[str], token: str | None
) -> set[str] | None:
    """The names a server answers to besides loopback; None when it answers to any ``Host``.

    Args:
        bound: what the server is bound to (the ``--host`` value and the socket's address).
        extra: the ``--allow-host`` names, already checked.
        token: the server's token; without one every request is checked.
    """
    bound = {normal(b) for b in bound}
    if token is not None and not extra and bound & WILDCARDS:
        return None
    return (bound - WILDCARDS) | {normal(e) for e in extra}


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class HostAllowList:
    """ASGI middleware: answer only requests whose ``Host`` is loopback or one of ``names``.

    Args:
        app: the application behind it.
        names: the other host names or addresses allowed (:func:`normal` forms); None allows any.
    """

    def __init__(self, app: ASGIApp, names: Collection[str] | None = ()) -> None:
        self.app = app
        self._names = None if names is None else frozenset(normal(n) for n in names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._names is None:
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope["headers"] if k == b"host"), None)
        given = None if header is None else header.decode("latin-1")
        if given is not None and self.allows(host_of(given)):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # policy violation
        else:
            await _refusal(given)(scope, receive, send)

    def allows(self, host: str) -> bool:
        """Whether a request naming ``host`` (a :func:`host_of` result) is answered."""
        return self._names is None or is_local(host) or host in self._names


def _refusal(given: str | None) -> JSONResponse:
    named = "no Host header" if given is None else f"Host {given[:SHOWN_CHARS]!r}"
    detail = (
        f"{named} is not served here (a guard against DNS rebinding); if clients should reach "
        "this server by that name, start bpmon serve with --allow-host NAME"
    )
    return JSONResponse({"detail": detail}, status_code=MISDIRECTED)
