"""The JSON API through a real uvicorn: jobs, runs, starting and stopping watches, bad requests.

The runs directory holds real reports (``alpha`` twice, ``beta`` once); watched jobs run the tiny
scenario on the real runtime. A stored report is compared byte for byte with what the real
``bpmon diagnose RUN --format json`` prints.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

from bpmon.history.runs import RunStore
from bpmon.model.errors import BpmonError
from bpmon.model.report_json import report_from_json
from bpmon.scenario import load_example, parse_scenario
from bpmon.service import facade
from bpmon.service.stored import find_run
from bpmon.service.watching import Watches
from bpmon.web.runs import public_message
from bpmon.web.schemas import Health, JobDetail, JobList, JobSummary, Problem, RunList

from .servers import ServeFactory, tiny, wait_until


def runs_of(runs_dir: Path) -> dict[str, Path]:
    """The newest run folder (by its window) of each job."""
    found: dict[str, tuple[datetime, str, Path]] = {}
    for run in (p for p in runs_dir.iterdir() if (p / "report.json").is_file()):
        report = report_from_json((run / "report.json").read_text())
        key = (report.window.start, run.name, run)
        if report.job not in found or found[report.job][:2] < key[:2]:
            found[report.job] = key
    return {job: run for job, (_, _, run) in found.items()}


SHAPES: dict[str, type[BaseModel]] = {
    "/healthz": Health,
    "/api/v1/jobs": JobList,
    "/api/v1/jobs/": JobDetail,
    "/api/v1/runs": RunList,
}
"""The model each answer is checked against (a path beginning ``/api/v1/jobs/``: a job's)."""


def get(client: httpx.Client, path: str, status: int = 200) -> Any:
    """GET ``path``: its JSON, checked against the model ``/docs`` shows for it (every field
    named, none missing, none more), or :class:`Problem` for an error."""
    response = client.get(path)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    shaped(response, path.split("?", maxsplit=1)[0])
    return response.json()


def shaped(response: httpx.Response, path: str) -> None:
    if response.status_code >= 400 and path != "/healthz":
        Problem.model_validate(response.json())
        return
    for prefix, model in sorted(SHAPES.items(), key=lambda kv: -len(kv[0])):
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            model.model_validate(response.json())
            return


# -- health, docs ---------------------------------------------------------------------------------


def test_healthz_says_ok_and_what_is_watched(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches)
    assert get(served.client, "/healthz") == {
        "status": "ok",
        "version": "0.1.0",
        "watches": 0,
        "stuck": 0,
        "watching": [],
        "stuck_watches": [],
    }


def test_the_openapi_document_lists_every_endpoint(serve: ServeFactory, watches: Watches) -> None:
    served = serve(watches)
    paths = set(get(served.client, "/openapi.json")["paths"])
    assert {
        "/api/v1/jobs",
        "/api/v1/jobs/{job}",
        "/api/v1/jobs/{job}/events",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/jobs/{job}/vertices/{vertex}/backpressure",
        "/healthz",
        "/metrics",
    } <= paths
    assert served.client.get("/docs").status_code == 200


def test_every_json_answer_has_its_shape_in_the_openapi_document(
    serve: ServeFactory, watches: Watches
) -> None:
    """What ``/docs`` shows: each JSON route's 200 (201) answer and its errors name a schema
    with the model's fields, so a user reads every field there."""
    document = get(serve(watches).client, "/openapi.json")
    paths, schemas = document["paths"], document["components"]["schemas"]

    def schema(path: str, method: str, status: str) -> str:
        content = paths[path][method]["responses"][status]["content"]["application/json"]
        return str(content["schema"]["$ref"]).rsplit("/", 1)[-1]

    assert schema("/api/v1/jobs", "get", "200") == "JobList"
    assert schema("/api/v1/jobs", "post", "201") == "JobSummary"
    assert schema("/api/v1/jobs", "post", "409") == "Problem"
    assert schema("/api/v1/jobs/{job}", "get", "200") == "JobDetail"
    assert schema("/api/v1/jobs/{job}", "get", "404") == "Problem"
    assert schema("/api/v1/jobs/{job}", "delete", "200") == "JobSummary"
    assert schema("/api/v1/runs", "get", "200") == "RunList"
    assert schema("/healthz", "get", "503") == "Health"
    for model in (JobList, JobDetail, RunList, Health, Problem):
        assert set(schemas[model.__name__]["properties"]) == set(model.model_fields)
    assert {"latest", "history", "leaks", "autoscaler"} <= set(schemas["JobDetail"]["properties"])


# -- stored jobs and runs -------------------------------------------------------------------------


def test_stored_jobs_are_listed_with_their_latest_level(
    serve: ServeFactory, watches: Watches
) -> None:
    jobs = get(serve(watches).client, "/api/v1/jobs")
    assert jobs["errors"] == []
    assert [j["job"] for j in jobs["jobs"]] == ["alpha", "beta"]
    for job in jobs["jobs"]:
        assert (job["state"], job["watched"], job["source"]) == ("stored", False, "runtime")
        assert job["level"] in ("OK", "LOW", "HIGH")
        assert job["diagnosed"] is True


def test_a_stored_job_has_its_latest_report_and_every_burst(
    serve: ServeFactory, watches: Watches, runs_dir: Path
) -> None:
    doc = get(serve(watches).client, "/api/v1/jobs/alpha")
    newest = runs_of(runs_dir)["alpha"]
    assert doc["run_id"] == newest.name
    assert doc["latest"] == report_to_doc(newest / "report-1.json")  # the last burst
    history = doc["history"]
    assert len(history) == 3  # one burst of the first run, two of the second
    assert [h["burst"] for h in history] == [0, 0, 1]
    assert history[-1]["run_id"] == newest.name
    assert set(history[0]["levels"]) == {"src", "out"}
    assert history == sorted(history, key=lambda h: h["time"])


def report_to_doc(path: Path) -> Any:
    return json.loads(path.read_text())


def test_history_is_cut_to_the_newest_bursts(serve: ServeFactory, watches: Watches) -> None:
    doc = get(serve(watches).client, "/api/v1/jobs/alpha?limit=1")
    assert [(h["burst"]) for h in doc["history"]] == [1]


def test_runs_are_listed_newest_first_and_by_job(
    serve: ServeFactory, watches: Watches, runs_dir: Path
) -> None:
    client = serve(watches).client
    runs = get(client, "/api/v1/runs")
    assert runs["errors"] == []
    stored = [p.name for p in runs_dir.iterdir() if (p / "report.json").is_file()]
    assert sorted(r["run_id"] for r in runs["runs"]) == sorted(stored)
    starts = [r["start"] for r in runs["runs"]]
    assert starts == sorted(starts, reverse=True)
    only = get(client, "/api/v1/runs?job=beta")["runs"]
    assert [r["job"] for r in only] == ["beta"]
    assert only[0]["bursts"] == 1


def test_a_run_is_byte_identical_to_bpmon_diagnose_json(
    serve: ServeFactory, watches: Watches, runs_dir: Path, bpmon_bin: Path
) -> None:
    client = serve(watches).client
    run = runs_of(runs_dir)["alpha"].name
    for burst in (0, 1):
        command = [str(bpmon_bin), "diagnose", run, "--format", "json", "--burst", str(burst)]
        printed = subprocess.run(
            [*command, "--runs-dir", str(runs_dir)],
            check=True,
            capture_output=True,
        ).stdout
        served = client.get(f"/api/v1/runs/{run}", params={"burst": burst})
        assert served.status_code == 200
        assert served.headers["content-type"] == "application/json"
        assert served.content == printed


# -- unknown ids and bad requests -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "names"),
    [
        ("/api/v1/jobs/nope", 404, "nope"),
        ("/api/v1/jobs/nope/events", 404, "nope"),
        ("/api/v1/runs/20260101T000000Z-nope-0000", 404, "20260101T000000Z-nope-0000"),
        ("/api/v1/jobs/alpha?limit=0", 422, "limit"),
        ("/api/v1/jobs/alpha?limit=many", 422, "limit"),
        ("/api/v1/runs/x?burst=-1", 422, "burst"),
        ("/api/v1/nothing-here", 404, "Not Found"),
    ],
)
def test_a_bad_request_is_4xx_with_a_json_line_naming_the_problem(
    serve: ServeFactory, watches: Watches, path: str, status: int, names: str
) -> None:
    detail = get(serve(watches).client, path, status)["detail"]
    assert isinstance(detail, str) and names in detail and "\n" not in detail


def test_a_missing_burst_of_a_run_is_404(
    serve: ServeFactory, watches: Watches, runs_dir: Path
) -> None:
    run = runs_of(runs_dir)["beta"].name
    detail = get(serve(watches).client, f"/api/v1/runs/{run}?burst=7", 404)["detail"]
    assert "no burst 7" in detail
    assert str(runs_dir) not in detail  # the server's own paths stay on the server
    assert f"<runs-dir>/{run} holds report.json" in detail  # and the path says where it is


def test_a_path_in_a_relative_runs_dir_reads_as_given_from_where_the_server_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bpmon-runs" / "RUN").mkdir(parents=True)
    settings = facade.Settings(runs_dir=Path("bpmon-runs"))
    folder = find_run("RUN", settings)  # resolved, as the API finds it
    assert folder is not None and folder.is_absolute()
    with pytest.raises(BpmonError) as raised:
        facade.load_report(str(folder), settings, burst=7)
    assert str(tmp_path) in str(raised.value)
    said = public_message(str(raised.value), settings)
    assert str(tmp_path) not in said
    assert "no burst 7: bpmon-runs/RUN holds" in said


def test_an_unknown_job_lists_the_known_ones_and_an_example_s_job_name(
    serve: ServeFactory, watches: Watches
) -> None:
    client = serve(watches).client
    detail = get(client, "/api/v1/jobs/hot-key", 404)["detail"]
    assert "the example 'hot-key' runs as job 'hot-customer'" in detail
    assert "known jobs: alpha, beta" in detail
    flink = client.get("/jobs/hot-key/vertices/src/backpressure")
    assert flink.status_code == 404 and "hot-customer" in flink.json()["errors"][0]


# -- starting and stopping watches ----------------------------------------------------------------


def test_a_shipped_example_is_started_and_stopped_through_the_api(
    serve: ServeFactory, watches: Watches
) -> None:
    client = serve(watches).client
    started = client.post("/api/v1/jobs", json={"scenario": "healthy", "every_s": 30})
    assert started.status_code == 201, started.text
    JobSummary.model_validate(started.json())
    job = started.json()["job"]  # the name inside the example file
    assert started.headers["location"] == f"/api/v1/jobs/{job}"
    assert started.json()["state"] == "running"
    assert get(client, "/healthz")["watching"] == [job]
    again = client.post("/api/v1/jobs", json={"scenario": "healthy"})
    assert again.status_code == 409 and job in Problem.model_validate(again.json()).detail
    stopped = client.delete(f"/api/v1/jobs/{job}")
    assert stopped.status_code == 200
    JobSummary.model_validate(stopped.json())
    assert stopped.json()["state"] == "ended"
    assert get(client, f"/api/v1/jobs/{job}")["leaks"] == []
    assert get(client, "/healthz")["watching"] == []


def test_a_new_watch_answers_with_its_own_run_not_an_older_one(
    serve: ServeFactory, watches: Watches, runs_dir: Path
) -> None:
    job = load_example("healthy").name
    older = facade.load_report(str(runs_of(runs_dir)["beta"]), watches.settings)
    RunStore(runs_dir).save(replace(older, run_id="20200101T000000Z-old-0001", job=job))
    client = serve(watches).client
    assert get(client, f"/api/v1/jobs/{job}")["run_id"] == "20200101T000000Z-old-0001"
    started = client.post("/api/v1/jobs", json={"scenario": "healthy", "every_s": 30}).json()
    assert started["run_id"] != "20200101T000000Z-old-0001"  # the new watch's own run...
    assert (started["level"], started["updated"], started["root_cause"]) == (None, None, None)
    shown = get(client, f"/api/v1/jobs/{job}")  # ...with no report of its own yet
    assert shown["latest"] is None and shown["history"][0]["run_id"] == "20200101T000000Z-old-0001"
    stopped = client.delete(f"/api/v1/jobs/{job}").json()  # stopped before its first burst:
    assert stopped["run_id"] == "20200101T000000Z-old-0001"  # a run that exists is shown
    assert client.get(f"/api/v1/runs/{stopped['run_id']}").status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [
        ({"scenario": "no-such-example"}, 400, "no-such-example"),
        ({"scenario": "../../etc/passwd"}, 400, "not a shipped example"),
        ({}, 422, "scenario"),
        ({"scenario": "demo", "every_s": 0}, 422, "every_s"),
        ({"scenario": "demo", "extra": 1}, 422, "extra"),
    ],
)
def test_a_bad_start_request_starts_nothing(
    serve: ServeFactory, watches: Watches, body: dict[str, Any], status: int, names: str
) -> None:
    client = serve(watches).client
    response = client.post("/api/v1/jobs", json=body)
    assert response.status_code == status
    assert names in response.json()["detail"]
    assert watches.running() == []


def test_stopping_a_job_this_server_does_not_watch_is_404(
    serve: ServeFactory, watches: Watches
) -> None:
    client = serve(watches).client
    assert client.delete("/api/v1/jobs/alpha").status_code == 404  # stored, not watched
    assert client.delete("/api/v1/jobs/nope").status_code == 404


def test_a_watched_job_shows_its_stored_past_then_its_new_bursts(
    serve: ServeFactory, watches: Watches
) -> None:
    watches.start_scenario(parse_scenario(tiny("alpha")))
    client = serve(watches).client

    def new_bursts() -> list[Any]:
        doc = get(client, "/api/v1/jobs/alpha")
        return [h for h in doc["history"] if h["run_id"] == doc["run_id"]]

    wait_until(lambda: len(new_bursts()) >= 2, "two bursts of the watched job")
    doc = get(client, "/api/v1/jobs/alpha")
    assert (doc["state"], doc["watched"]) == ("running", True)
    assert len(doc["history"]) >= 3 + 2  # the three stored bursts come first
    assert doc["latest"]["run_id"] == doc["run_id"]
    listed = {j["job"]: j for j in get(client, "/api/v1/jobs")["jobs"]}
    assert listed["alpha"]["state"] == "running" and listed["beta"]["state"] == "stored"


def test_a_scenario_started_on_the_command_line_is_saved_like_bpmon_run(
    serve: ServeFactory, runs_dir: Path
) -> None:
    watches = Watches(facade.Settings(runs_dir=runs_dir), every_s=0.2)
    job = watches.start_scenario(parse_scenario(tiny("gamma")))
    client = serve(watches).client
    wait_until(lambda: get(client, f"/api/v1/jobs/{job}")["latest"], "a report of gamma")
    run_id = get(client, f"/api/v1/jobs/{job}")["run_id"]
    served = client.get(f"/api/v1/runs/{run_id}")
    assert served.status_code == 200
    assert report_from_json(served.text).job == "gamma"


# -- /metrics -------------------------------------------------------------------------------------


def test_metrics_cover_every_job_and_count_bpmons_own_work(
    serve: ServeFactory, watches: Watches
) -> None:
    watches.start_scenario(parse_scenario(tiny("live")))
    client = serve(watches).client
    wait_until(lambda: watches.counters().diagnoses >= 1, "a diagnosis")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    ratio = families["bpmon_subtask_backpressure_ratio"]
    assert {s.labels["job"] for s in ratio.samples} == {"alpha", "beta", "live"}
    diagnoses = families["bpmon_diagnoses"].samples
    assert diagnoses[0].name == "bpmon_diagnoses_total" and diagnoses[0].value >= 1
