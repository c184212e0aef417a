"""HTTPS for ``bpmon serve``: the certificate and key, checked before anything starts.

uvicorn serves TLS itself from a PEM certificate (chain) file and its unencrypted PEM key. A file
that is missing or unreadable, a key that is not the certificate's, or a key protected by a
passphrase (uvicorn would ask for it on the terminal, which a service has not got) is one line and
exit code 2 at start, before any job is watched. With TLS on, the URL announced is ``https://``
and the sign-in cookie is ``Secure`` (:mod:`bpmon.web.login`).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from bpmon.model.errors import ConfigError

MAKE_ONE = (
    "openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=localhost "
    "-keyout key.pem -out cert.pem"
)
"""A command that makes a self-signed pair, for the error messages."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A certificate and its key, as PEM files, known to load together."""

    certfile: Path
    keyfile: Path


def check_tls(certfile: Path | None, keyfile: Path | None) -> TlsFiles | None:
    """The TLS files to serve with, or None for plain HTTP (neither given).

    Raises:
        ConfigError: one without the other, a file that cannot be read, a key that is encrypted
            or not the certificate's, a file that is not PEM.
    """
    if certfile is None and keyfile is None:
        return None
    if certfile is None or keyfile is None:
        raise ConfigError(
            "--certfile and --keyfile go together: pass both for HTTPS, or neither for HTTP"
        )
    for flag, path, marker in (
        ("--certfile", certfile, b"-----BEGIN CERTIFICATE-----"),
        ("--keyfile", keyfile, b"PRIVATE KEY-----"),
    ):
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{flag} {path}: {exc.strerror or exc}") from None
        if marker not in text:
            what = "certificate" if flag == "--certfile" else "private key"
            raise ConfigError(f"{flag} {path}: no PEM {what} in it; e.g. `{MAKE_ONE}` makes a pair")
    _load(certfile, keyfile)
    return TlsFiles(certfile, keyfile)


def _load(certfile: Path, keyfile: Path) -> None:
    """Load the pair as uvicorn will; refuse an encrypted key instead of asking for it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    pair = f"--certfile {certfile} --keyfile {keyfile}"

    def no_passphrase() -> str:
        raise ConfigError(
            f"--keyfile {keyfile}: the key is protected by a passphrase; bpmon serve needs an "
            f"unencrypted key (`openssl pkey -in {keyfile} -out plain.pem` writes one)"
        )

    try:
        context.load_cert_chain(certfile, keyfile, password=no_passphrase)
    except ssl.SSLError as exc:
        raise ConfigError(f"{pair}: {_reason(exc)}") from None


def _reason(exc: ssl.SSLError) -> str:
    reason = str(exc.reason or exc).upper()
    if "KEY_VALUES_MISMATCH" in reason:
        return "the key is not the certificate's; pass the key the certificate was made with"
    return f"cannot be loaded ({exc.reason or exc}); e.g. `{MAKE_ONE}` makes a pair"
