"""Who may talk to the server: a token on every request when one is set, loopback otherwise."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bpmon.model.errors import ConfigError
from bpmon.scenario import parse_scenario
from bpmon.service.watching import Watches
from bpmon.web.auth import check_exposure, is_loopback, load_token

from .servers import TOKEN, ServeFactory, tiny

PROTECTED = [
    "/api/v1/jobs",
    "/api/v1/jobs/alpha",
    "/api/v1/jobs/alpha/events",
    "/api/v1/runs",
    "/jobs/alpha/vertices/src/backpressure",
    "/metrics",
    "/docs",
    "/openapi.json",
    "/api/v1/no-such-path",
]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-wrong-token-wrong"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ],
    ids=["none", "wrong", "longer", "basic", "no-scheme"],
)
def test_without_the_right_token_every_path_is_401(
    serve: ServeFactory, watches: Watches, headers: dict[str, str]
) -> None:
    served = serve(watches, token=TOKEN)
    with httpx.Client(base_url=served.url, headers=headers) as stranger:
        for path in PROTECTED:
            response = stranger.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert "Authorization: Bearer" in response.json()["detail"]
        assert stranger.post("/api/v1/jobs", json={"scenario": "demo"}).status_code == 401
        assert stranger.delete("/api/v1/jobs/alpha").status_code == 401
    assert watches.running() == []


def test_with_the_token_every_path_answers(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches, token=TOKEN)
    for path in PROTECTED[:-1]:
        if path.endswith("/events"):
            with served.client.stream("GET", path) as stream:
                assert stream.status_code == 200
            continue
        assert served.client.get(path).status_code == 200, path
    lower = {"Authorization": f"bearer {TOKEN}"}  # the scheme is case-insensitive
    assert served.client.get("/api/v1/jobs", headers=lower).status_code == 200


def test_healthz_needs_no_token_and_names_jobs_only_to_who_has_it(
    serve: ServeFactory, watches: Watches
) -> None:
    watches.start_scenario(parse_scenario(tiny("secret-job")))
    served = serve(watches, token=TOKEN)
    stranger = httpx.get(f"{served.url}/healthz")
    assert stranger.status_code == 200
    assert stranger.json() == {"status": "ok", "version": "0.1.0", "watches": 1, "stuck": 0}
    assert "secret-job" not in stranger.text
    wrong = httpx.get(f"{served.url}/healthz", headers={"Authorization": "Bearer " + "x" * 20})
    assert "secret-job" not in wrong.text
    for known in (
        served.client.get("/healthz"),  # the bearer header
        httpx.get(f"{served.url}/healthz", cookies={"bpmon_token": TOKEN}),  # a signed-in browser
    ):
        assert known.status_code == 200
        assert known.json()["watching"] == ["secret-job"] and known.json()["stuck_watches"] == []


def test_metrics_public_opens_metrics_only(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches, token=TOKEN, metrics_public=True)
    assert httpx.get(f"{served.url}/metrics").status_code == 200
    assert httpx.get(f"{served.url}/api/v1/jobs").status_code == 401


def test_without_a_token_nothing_is_asked(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches)
    assert httpx.get(f"{served.url}/api/v1/jobs").status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)
    check_exposure(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.org", "10.0.0.1"])
def test_anything_else_needs_a_token(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ConfigError, match="--token-file") as info:
        check_exposure(host, None)
    assert "\n" not in str(info.value)
    check_exposure(host, TOKEN)


def test_a_token_comes_from_its_file_then_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    assert load_token(path, {"BPMON_TOKEN": "x" * 20}) == TOKEN
    assert load_token(None, {"BPMON_TOKEN": "y" * 20}) == "y" * 20
    assert load_token(None, {}) is None


@pytest.mark.parametrize("text", ["short", "has a space inside it!", ""])
def test_a_weak_token_is_refused_with_the_fix(tmp_path: Path, text: str) -> None:
    path = tmp_path / "token"
    path.write_text(text)
    with pytest.raises(ConfigError, match="16 characters"):
        load_token(path, {})


def test_an_unreadable_token_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing"):
        load_token(tmp_path / "missing", {})
