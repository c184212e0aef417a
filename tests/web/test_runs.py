"""Stored runs named in URLs: no path outside the runs directory, a corrupt report stays one run's.

Beside the runs directory lies a valid report the server must never serve (``outside``); every
attempt to reach it, or any other file, through a run id is refused. A corrupt report is served
as an error for its run only, the rest is served, and the file is left byte for byte as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bpmon.service.watching import Watches

from .servers import ServeFactory


@pytest.fixture
def outside(runs_dir: Path) -> Path:
    """A real run copied beside the runs directory, and a link to it from inside."""
    source = next(p for p in runs_dir.iterdir() if (p / "report.json").is_file())
    target = runs_dir.parent / "outside"
    target.mkdir()
    (target / "report.json").write_bytes((source / "report.json").read_bytes())
    os.symlink(target, runs_dir / "20990101T000000Z-link-0000")
    return target


TRAVERSALS = [
    "/api/v1/runs/..%2Foutside",
    "/api/v1/runs/..%2F..%2F..%2Fetc%2Fpasswd",
    "/api/v1/runs/%2E%2E%2Foutside",
    "/api/v1/runs/%2E%2E",
    "/api/v1/runs/..",
    "/api/v1/runs/%2Fetc%2Fpasswd",
    "/api/v1/runs//etc/passwd",
    "/api/v1/runs/%252E%252E%252Foutside",
    "/api/v1/runs/..%5Coutside",
    "/api/v1/runs/20990101T000000Z-link-0000",
    "/api/v1/runs/20990101T000000Z-link-0000?burst=0",
    "/api/v1/runs/outside",
    "/api/v1/runs/.%2E%2Foutside",
    "/api/v1/runs/history",
    "/jobs/..%2Foutside/vertices/src/backpressure",
    "/jobs/20990101T000000Z-link-0000/vertices/src/backpressure",
]


@pytest.mark.parametrize("raw", TRAVERSALS)
def test_no_run_id_reaches_outside_the_runs_directory(
    serve: ServeFactory, watches: Watches, outside: Path, raw: str
) -> None:
    client = serve(watches).client
    url = client.build_request("GET", "/").url.copy_with(raw_path=raw.encode())
    response = client.get(url)
    assert response.status_code in (400, 404), response.text
    assert "schema" not in response.text  # no report came back
    assert "passwd" not in response.text or response.status_code == 404


def test_a_link_out_of_the_runs_directory_is_not_listed(
    serve: ServeFactory, watches: Watches, outside: Path
) -> None:
    runs = serve(watches).client.get("/api/v1/runs").json()["runs"]
    assert "20990101T000000Z-link-0000" not in [r["run_id"] for r in runs]
    assert len(runs) == 3


@pytest.fixture
def corrupt(runs_dir: Path) -> tuple[Path, bytes]:
    """The newest run of ``beta`` with its report cut in half."""
    run = max(p for p in runs_dir.iterdir() if "beta" in p.name)
    report = run / "report.json"
    torn = report.read_bytes()[:200]
    report.write_bytes(torn)
    return run, torn


def test_a_corrupt_report_is_an_error_for_its_run_only(
    serve: ServeFactory, watches: Watches, corrupt: tuple[Path, bytes]
) -> None:
    run, torn = corrupt
    client = serve(watches).client
    broken = client.get(f"/api/v1/runs/{run.name}")
    assert broken.status_code == 422
    detail = broken.json()["detail"]
    assert run.name in detail and "untouched" in detail and "\n" not in detail
    assert str(run.parent) not in detail  # the server's own paths stay on the server
    listed = client.get("/api/v1/runs").json()  # from the runs' manifests: the torn run is
    assert len(listed["runs"]) == 3 and listed["errors"] == []  # listed as it was saved...
    for other in listed["runs"]:
        expected = 422 if other["run_id"] == run.name else 200  # ...and says so when read
        assert client.get(f"/api/v1/runs/{other['run_id']}").status_code == expected
    jobs = client.get("/api/v1/jobs").json()
    assert [j["job"] for j in jobs["jobs"]] == ["alpha"]
    assert jobs["errors"] and run.name in jobs["errors"][0]
    assert client.get("/api/v1/jobs/beta").status_code == 404
    assert client.get("/metrics").status_code == 200
    flink = client.get(f"/jobs/{run.name}/vertices/src/backpressure")  # Flink-compatible
    assert flink.status_code == 422 and str(run.parent) not in flink.text
    assert f"<runs-dir>/{run.name}/report.json" in flink.json()["errors"][0]
    assert (run / "report.json").read_bytes() == torn  # left exactly as it was
    assert sorted(p.name for p in run.iterdir()) == ["bursts.jsonl", "report.json"]


def test_a_corrupt_later_burst_takes_its_run_out_of_the_jobs_but_not_the_first_burst(
    serve: ServeFactory, watches: Watches, runs_dir: Path
) -> None:
    run = max(p for p in runs_dir.iterdir() if (p / "report-1.json").is_file())
    (run / "report-1.json").write_text("{not json")
    client = serve(watches).client
    assert client.get(f"/api/v1/runs/{run.name}").status_code == 200
    assert client.get(f"/api/v1/runs/{run.name}?burst=1").status_code == 422
    alpha = client.get("/api/v1/jobs/alpha").json()
    assert alpha["run_id"] != run.name  # its older run is served instead
    assert (run / "report-1.json").read_text() == "{not json"
