"""Who may talk to ``bpmon serve``: loopback by default, a bearer token for anything else.

A server bound to a loopback address answers only the machine it runs on. Bound anywhere else it
must have a token (``--token-file`` or ``BPMON_TOKEN``), and then every request but ``/healthz``
(and ``/metrics`` with ``--metrics-public``) carries ``Authorization: Bearer <token>``, compared
in constant time. The check is an ASGI middleware in front of every route, so a request without
the token learns nothing, not even which paths exist. A public path is answered either way, and
learns from ``scope[AUTHORIZED]`` whether the caller showed the token (``/healthz`` names the
watched jobs only then).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Collection, Mapping
from pathlib import Path

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from bpmon.model.errors import ConfigError

TOKEN_ENV = "BPMON_TOKEN"
"""The environment variable a token is read from when there is no ``--token-file``."""
MIN_TOKEN_CHARS = 16
"""The shortest token accepted: a guessable one protects nothing."""
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})
AUTHORIZED = "bpmon.authorized"
"""The ASGI scope key BearerAuth sets: True when the request carried the right token."""


def is_loopback(host: str) -> bool:
    """True for ``127.0.0.1``, ``::1``, ``localhost`` and the rest of the loopback ranges."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def load_token(token_file: Path | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The token from ``token_file`` (surrounding whitespace dropped), else ``$BPMON_TOKEN``.

    Raises:
        ConfigError: the file cannot be read, or the token is shorter than MIN_TOKEN_CHARS.
    """
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise ConfigError(f"--token-file {token_file}: {reason}") from None
        where = f"--token-file {token_file}"
    elif environ.get(TOKEN_ENV):
        token, where = environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ConfigError(
            f"{where}: the token needs at least {MIN_TOKEN_CHARS} characters and no spaces; "
            "make one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return token


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token.

    Raises:
        ConfigError: ``host`` is not loopback and ``token`` is None.
    """
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"--host {host}: serving beyond this machine needs a token; pass --token-file FILE "
            f"or set {TOKEN_ENV} (or serve on 127.0.0.1)"
        )


class BearerAuth:
    """ASGI middleware: HTTP requests need ``Authorization: Bearer <token>``, except ``public``.

    Args:
        app: the application behind it.
        token: the expected token.
        public: paths served without a token (exact matches).
    """

    def __init__(self, app: ASGIApp, token: str, public: Collection[str] = ()) -> None:
        self.app = app
        self._token = token.encode("utf-8")
        self._public = frozenset(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        allowed = self._allowed(scope)
        if allowed or scope["path"] in self._public:
            await self.app({**scope, AUTHORIZED: allowed}, receive, send)
            return
        refusal = JSONResponse(
            {"detail": "missing or wrong token: send the header 'Authorization: Bearer <token>'"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="bpmon"'},
        )
        await refusal(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, credentials = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    return hmac.compare_digest(credentials.strip(), self._token)
                return False
        return False
