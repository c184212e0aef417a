"""The Host allow-list: a page served from another name (DNS rebinding) gets nothing from bpmon.

Requests go to a real uvicorn on 127.0.0.1 with the ``Host`` header a rebound browser would send
(the attacker's name); the real ``bpmon serve`` is run for ``--allow-host``.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from bpmon.model.errors import ConfigError
from bpmon.service.watching import Watches
from bpmon.web.hosts import allowed_names, check_allow_host, host_of

from .servers import TOKEN, WAIT_S, ServeFactory


def _as(
    url: str,
    host: str,
    path: str = "/api/v1/jobs",
    *,
    method: str = "GET",
    body: object = None,
    token: str | None = None,
) -> httpx.Response:
    """``method path`` on the server at ``url``, naming ``host`` as a rebound browser would."""
    headers = {"Host": host} | ({} if token is None else {"Authorization": f"Bearer {token}"})
    with httpx.Client(base_url=url, timeout=WAIT_S) as client:
        return client.request(method, path, headers=headers, json=body)


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8484", "LocalHost.", "127.0.0.1:1", "127.9.9.9", "[::1]:80"]
)
def test_loopback_names_are_answered_with_any_port(
    serve: ServeFactory, watches: Watches, host: str
) -> None:
    served = serve(watches)
    assert _as(served.url, host).status_code == 200


@pytest.mark.parametrize(
    "host", ["rebound.example", "rebound.example:8484", "localhost.rebound.example", "10.0.0.1"]
)
def test_a_rebound_name_is_refused_with_the_fix(
    serve: ServeFactory, watches: Watches, host: str
) -> None:
    served = serve(watches)
    refused = _as(served.url, host)
    assert refused.status_code == 421
    detail = refused.json()["detail"]
    assert "--allow-host" in detail and "\n" not in detail
    assert "alpha" not in refused.text  # nothing of the jobs leaks


def test_a_rebound_page_can_neither_start_nor_stop_a_watch(
    serve: ServeFactory, watches: Watches
) -> None:
    served = serve(watches)
    started = _as(served.url, "rebound.example", method="POST", body={"scenario": "demo"})
    assert started.status_code == 421
    assert watches.running() == []
    stopped = _as(served.url, "rebound.example", "/api/v1/jobs/alpha", method="DELETE")
    assert stopped.status_code == 421
    for path in ("/", "/healthz", "/metrics", "/docs", "/api/v1/runs", "/login"):
        assert _as(served.url, "rebound.example", path).status_code == 421, path


def test_the_host_check_comes_before_the_token(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches, token=TOKEN)
    assert _as(served.url, "rebound.example", token=TOKEN).status_code == 421
    assert _as(served.url, "localhost", token=TOKEN).status_code == 200


def test_allowed_names_are_answered_and_only_them(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches, allow_hosts={"bpmon.example.org", "10.1.2.3"})
    for host in ("bpmon.example.org:8484", "BPMON.example.org", "10.1.2.3", "localhost"):
        assert _as(served.url, host).status_code == 200, host
    assert _as(served.url, "other.example.org").status_code == 421


def test_none_answers_any_host(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches, token=TOKEN, allow_hosts=None)
    assert _as(served.url, "anything.example", token=TOKEN).status_code == 200


def test_a_request_without_host_is_refused(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches)
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as raw:
        raw.sendall(b"GET /api/v1/jobs HTTP/1.0\r\n\r\n")  # HTTP/1.0 may omit Host
        answer = b""
        while chunk := raw.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 421 ") and b"no Host header" in answer


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("localhost", "localhost"),
        ("LocalHost:8484", "localhost"),
        ("a.example.:80", "a.example"),
        ("[::1]:8484", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("127.000.0.1", "127.000.0.1"),  # not an address Python reads: a name, never loopback
        (" 10.0.0.1 ", "10.0.0.1"),
    ],
)
def test_the_host_of_a_header(header: str, host: str) -> None:
    assert host_of(header) == host


def test_a_wildcard_bind_with_a_token_answers_any_host_unless_names_are_given() -> None:
    assert allowed_names(["0.0.0.0"], [], TOKEN) is None
    assert allowed_names(["::"], [], TOKEN) is None
    assert allowed_names(["0.0.0.0"], ["bpmon.example.org"], TOKEN) == {"bpmon.example.org"}
    assert allowed_names(["10.1.2.3"], [], TOKEN) == {"10.1.2.3"}
    assert allowed_names(["127.0.0.1"], [], None) == {"127.0.0.1"}
    assert allowed_names(["localhost", "127.0.0.1"], ["a.example"], None) == {
        "localhost",
        "127.0.0.1",
        "a.example",
    }


@pytest.mark.parametrize(
    "value", ["", "http://bpmon.example.org", "bpmon.example.org:8484", "a b", "x/y", "u@h"]
)
def test_a_bad_allow_host_is_refused_with_the_form_expected(value: str) -> None:
    with pytest.raises(ConfigError, match="--allow-host") as info:
        check_allow_host(value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("value", "kept"),
    [("Bpmon.Example.org.", "bpmon.example.org"), ("[::1]", "::1"), ("10.0.0.7", "10.0.0.7")],
)
def test_an_allow_host_is_kept_in_its_plain_form(value: str, kept: str) -> None:
    assert check_allow_host(value) == kept


@pytest.mark.slow
def test_bpmon_serve_answers_its_allow_host_names(bpmon_bin: Path, tmp_path: Path) -> None:
    names = ["--allow-host", "bpmon.example.org", "--allow-host", "metrics.example.org"]
    process = subprocess.Popen(
        [str(bpmon_bin), "serve", "--port", "0", "--runs-dir", str(tmp_path / "runs"), *names],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        serving = process.stderr.readline()
        answering = process.stderr.readline()
        url = serving.split("serving ", 1)[1].split()[0]
        assert answering.strip() == (
            "bpmon: answering Host localhost, loopback addresses, bpmon.example.org, "
            "metrics.example.org"
        )
        assert _as(url, "metrics.example.org:9090").status_code == 200
        assert _as(url, "rebound.example").status_code == 421
    finally:
        process.terminate()
        assert process.wait(timeout=WAIT_S) == 0
        assert process.stderr is not None
        process.stderr.close()


def test_a_bad_allow_host_stops_bpmon_serve_in_one_line(bpmon_bin: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(bpmon_bin), "serve", "--port", "0", "--allow-host", "https://bpmon.example.org"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpmon: error: --allow-host"), done.stderr
