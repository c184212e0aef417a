"""HTTPS: ``bpmon serve --certfile --keyfile`` with a real self-signed certificate made here.

The pair is made by the ``openssl`` command, else by the ``cryptography`` package; with neither
the tests are skipped. The server is the real ``bpmon serve``, and the client trusts that one
certificate only (httpx with ``verify`` = a context over it).
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import signal
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bpmon.model.errors import ConfigError
from bpmon.web.tls import check_tls

from .serve_process import bpmon_serve
from .servers import TOKEN, WAIT_S, tiny

Pair = tuple[Path, Path]


def make_pair(folder: Path, name: str, *, passphrase: str | None = None) -> Pair:
    """A self-signed certificate for localhost and 127.0.0.1, and its key (PEM files)."""
    cert, key = folder / f"{name}-cert.pem", folder / f"{name}-key.pem"
    if shutil.which("openssl"):
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
            + ["-days", "2", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)]
            + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
            + (["-passout", f"pass:{passphrase}"] if passphrase else ["-noenc"]),
            check=True,
            capture_output=True,
            timeout=WAIT_S,
        )
        return cert, key
    try:
        return _with_cryptography(cert, key, passphrase)
    except ImportError:
        pytest.skip("neither the openssl command nor the cryptography package is installed")


def _with_cryptography(cert: Path, key: Path, passphrase: str | None) -> Pair:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase.encode())
        if passphrase
        else serialization.NoEncryption()
    )
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
    )
    return cert, key


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return make_pair(tmp_path, "server")


def test_neither_file_is_plain_http() -> None:
    assert check_tls(None, None) is None


def test_a_good_pair_is_kept(pair: Pair) -> None:
    files = check_tls(*pair)
    assert files is not None and (files.certfile, files.keyfile) == pair


def _refused(cert: Path | None, key: Path | None) -> str:
    with pytest.raises(ConfigError) as info:
        check_tls(cert, key)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_one_without_the_other_is_refused(pair: Pair) -> None:
    assert "go together" in _refused(pair[0], None)
    assert "go together" in _refused(None, pair[1])


def test_a_key_that_is_not_the_certificates_is_refused(pair: Pair, tmp_path: Path) -> None:
    other = make_pair(tmp_path, "other")
    assert "not the certificate's" in _refused(pair[0], other[1])


def test_an_encrypted_key_is_refused_not_asked_for(pair: Pair, tmp_path: Path) -> None:
    locked = make_pair(tmp_path, "locked", passphrase="a-passphrase")
    assert "passphrase" in _refused(locked[0], locked[1])


def test_files_that_are_missing_or_not_pem_are_named(pair: Pair, tmp_path: Path) -> None:
    assert _refused(tmp_path / "nope.pem", pair[1]).startswith("--certfile ")
    assert _refused(pair[0], tmp_path / "nope.pem").startswith("--keyfile ")
    assert "no PEM certificate" in _refused(pair[1], pair[1])  # the key given as certificate
    assert "no PEM private key" in _refused(pair[0], pair[0])


@pytest.fixture
def trusting(pair: Pair) -> Iterator[httpx.Client]:
    """A client that trusts the test certificate only."""
    context = ssl.create_default_context(cafile=str(pair[0]))
    with httpx.Client(verify=context, timeout=WAIT_S, follow_redirects=False) as client:
        yield client


@pytest.mark.slow
def test_bpmon_serve_speaks_https_with_a_secure_cookie(
    bpmon_bin: Path, tmp_path: Path, pair: Pair, trusting: httpx.Client
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    args = ["--runs-dir", str(tmp_path / "runs"), "--token-file", str(token_file)]
    with bpmon_serve(
        bpmon_bin, *args, "--certfile", str(pair[0]), "--keyfile", str(pair[1])
    ) as child:
        assert child.url.startswith("https://127.0.0.1:")
        assert trusting.get(f"{child.url}/healthz").status_code == 200
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert trusting.get(f"{child.url}/api/v1/jobs", headers=bearer).status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the HTTPS port gets nothing
            httpx.get(child.url.replace("https://", "http://") + "/healthz", timeout=10)
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the certificate
            httpx.get(f"{child.url}/healthz", timeout=10)
        signed = trusting.post(f"{child.url}/login", data={"token": TOKEN, "next": "/"})
        assert signed.status_code == 303
        flags = [f.strip().lower() for f in signed.headers["set-cookie"].split(";")]
        assert {"secure", "httponly", "samesite=strict", "path=/"} <= set(flags)
        child.process.send_signal(signal.SIGTERM)
        code, lines = child.finish()
    assert code == 0, lines


def test_a_bad_pair_stops_bpmon_serve_before_anything_is_watched(
    bpmon_bin: Path, tmp_path: Path, pair: Pair
) -> None:
    other = make_pair(tmp_path, "other")
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(tiny())
    runs = tmp_path / "runs"
    tls = ["--certfile", str(pair[0]), "--keyfile", str(other[1])]
    done = subprocess.run(
        [
            str(bpmon_bin),
            "serve",
            "--port",
            "0",
            "--run",
            str(scenario),
            "--runs-dir",
            str(runs),
            *tls,
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
        stdin=subprocess.DEVNULL,  # an encrypted key would never be asked for anyway
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpmon: error: --certfile"), done.stderr
    assert "not the certificate's" in lines[0]
    assert not runs.exists() or list(runs.iterdir()) == []  # nothing was watched
