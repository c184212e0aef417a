"""Flink's checkpoint statistics as bpmon reads them (``bpmon/collectors/flink/checkpoints.py``):
parsed from responses recorded on a real Flink 2.3 cluster (``record.py``: an aligned job behind
a slow operator, the same unaligned, one whose checkpoints all expire, one that does not
checkpoint), served by a real HTTP server (``fake_flink.py``), and every way the reading can go
wrong (404, 5xx after the retries, documents of another shape): the window's checkpoints are then
None and one ``checkpoints-unread`` finding says why, never an error of the window."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.flink.checkpoints import (
    NEVER_MS,
    FlinkCheckpoints,
    config_of,
    counts_of,
    latest_of,
    subtasks_of,
)
from bpmon.collectors.flink.plan import FlinkGraph, JobRef, graph_of
from bpmon.collectors.flink.rest import FlinkRest
from bpmon.collectors.flink.target import FlinkTarget
from bpmon.model.checkpoints import CheckpointWindow
from bpmon.model.values import Finding
from bpmon.service.facade import Settings, drain, monitor_flink

from .fake_flink import Answer, Script, job_id, recorded, serving

BUSY = (503, {"errors": ["Service temporarily unavailable due to an ongoing leader election."]})


def routes_of(folder: str) -> dict[str, Answer]:
    return dict(recorded(folder))


def document(folder: str, suffix: str) -> Any:
    """The recorded document of the one path of ``folder`` ending with ``suffix``."""
    [doc] = [a[1] for p, a in recorded(folder).items() if p.endswith(suffix)]
    return copy.deepcopy(doc)


def graph(routes: dict[str, Answer]) -> FlinkGraph:
    jid = job_id(routes)
    name = routes["/jobs/overview"][1]["jobs"][0]["name"]
    return graph_of(JobRef(jid, name, "RUNNING"), routes[f"/jobs/{jid}"][1])


def no_sleep(_: float) -> None:
    pass


def read(
    script: Script, url: str, reader: FlinkCheckpoints | None = None
) -> tuple[CheckpointWindow | None, Finding | None, FlinkCheckpoints]:
    routes = dict(script.routes)
    jid = job_id(routes)
    reader = reader or FlinkCheckpoints(FlinkRest(url, sleep=no_sleep), jid, "job", "2.3.0")
    window, unread = reader.read(graph(routes))
    return window, unread, reader


# -- the documents ----------------------------------------------------------------------------


def test_the_settings_of_an_aligned_an_unaligned_and_an_unchecked_job() -> None:
    aligned = config_of(document("checkpoint-aligned", "/checkpoints/config"))
    assert (aligned.mode, aligned.interval_ms, aligned.timeout_ms) == ("aligned", 1000, 60000)
    assert aligned.aligned_timeout_ms == 0
    unaligned = config_of(document("checkpoint-unaligned", "/checkpoints/config"))
    assert unaligned.mode == "unaligned" and unaligned.aligned_timeout_ms == 0
    off = document("checkpoints-off", "/checkpoints/config")
    assert off["interval"] == NEVER_MS  # Flink 2.3 answers a job that never checkpoints so
    assert config_of(off).interval_ms is None


def test_an_unaligned_job_with_an_aligned_timeout_keeps_it() -> None:
    doc = document("checkpoint-unaligned", "/checkpoints/config")
    doc["aligned_checkpoint_timeout"] = 3000
    assert config_of(doc).aligned_timeout_ms == 3000
    doc["unaligned_checkpoints"] = False  # aligned: the timeout means nothing
    assert config_of(doc).aligned_timeout_ms == 0


def test_the_counts_and_the_newest_checkpoints() -> None:
    statistics = document("checkpoint-expired", "/checkpoints")
    assert counts_of(statistics) == (1, 9)
    completed, failed = latest_of(statistics)
    assert completed is not None and (completed.id, completed.status) == (1, "completed")
    assert failed is not None and (failed.id, failed.status) == (9, "failed")
    assert failed.failure == "Checkpoint expired before completing."
    assert failed.duration_ms == 2001
    none_yet = document("checkpoints-off", "/checkpoints")
    assert counts_of(none_yet) == (0, 0) and latest_of(none_yet) == (None, None)


def test_a_subtask_behind_backpressure_and_one_that_never_got_its_barrier() -> None:
    enrich = subtasks_of(document("checkpoint-aligned", "/details/5/subtasks/" + ENRICH))
    assert [s.index for s in enrich] == [0, 1]
    first = enrich[0]
    assert first.acknowledged and not first.unaligned
    assert first.start_delay_ms == 4069 and first.alignment_ms == 0
    assert (first.sync_ms, first.async_ms, first.persisted_bytes) == (0, 0, 0)
    pending = subtasks_of(document("checkpoint-expired", "/details/9/subtasks/" + ENRICH))
    assert [(s.acknowledged, s.reached, s.async_ms) for s in pending] == [(False, False, None)] * 2


def test_an_unaligned_subtask_persists_its_in_flight_data() -> None:
    enrich = subtasks_of(document("checkpoint-unaligned", "/details/19/subtasks/" + ENRICH))
    assert all(s.unaligned and s.acknowledged for s in enrich)
    assert all((s.start_delay_ms or 0) < 100 for s in enrich)
    assert sum(s.persisted_bytes or 0 for s in enrich) > 0


def test_flinks_minus_one_is_not_known() -> None:
    doc = document("checkpoint-aligned", "/details/5/subtasks/" + ENRICH)
    doc["subtasks"][0]["alignment"]["duration"] = -1
    doc["subtasks"][0]["start_delay"] = -1
    first = subtasks_of(doc)[0]
    assert first.alignment_ms is None and first.start_delay_ms is None


ENRICH = "9dd63673dd41ea021b896d5203f3ba7c"
"""The enrich vertex's id in the recordings (Flink derives it from the job's graph)."""


# -- one job's checkpoints, window after window -------------------------------------------------


@pytest.fixture
def aligned() -> Iterator[tuple[Script, str]]:
    script = Script(routes_of("checkpoint-aligned"))
    with serving(script) as url:
        yield script, url


def test_the_aligned_job_behind_its_slow_operator(aligned: tuple[Script, str]) -> None:
    window, unread, _ = read(*aligned)
    assert unread is None and window is not None
    assert (window.mode, window.interval_ms, window.completed, window.failed) == (
        "aligned",
        1000,
        5,
        1,
    )
    last = window.last
    assert last is not None and last.id == 5 and last.status == "completed"
    assert [v.name for v in last.vertices] == ["Source: numbers -> parse", "enrich", "sink: Writer"]
    enrich = last.vertices[1]
    assert [s.start_delay_ms for s in enrich.subtasks] == [4069, 4014]
    assert last.duration_ms == 4073 and window.last_failed is None


def test_an_ended_checkpoint_is_read_once(aligned: tuple[Script, str]) -> None:
    script, url = aligned
    window, _, reader = read(script, url)
    first = reader.last_cost.requests
    assert first == 5  # the config, /checkpoints, and the checkpoint's three vertices
    assert script.count("/checkpoints/config") == 1
    again, _, reader = read(script, url, reader)
    assert again == window
    assert reader.last_cost.requests == 1  # /checkpoints only: nothing new ended
    assert script.count("/checkpoints/config") == 1


def test_a_new_checkpoint_is_read_when_it_ended(aligned: tuple[Script, str]) -> None:
    script, url = aligned
    _, _, reader = read(script, url)
    jid = job_id(script.routes)
    statistics = copy.deepcopy(script.routes[f"/jobs/{jid}/checkpoints"][1])
    statistics["latest"]["completed"]["id"] = 6
    statistics["counts"]["completed"] = 6
    script.routes[f"/jobs/{jid}/checkpoints"] = (200, statistics)
    for path, answer in list(script.routes.items()):
        if "/details/5/" in path:
            script.routes[path.replace("/details/5/", "/details/6/")] = answer
    window, unread, reader = read(script, url, reader)
    assert unread is None and window is not None and window.last is not None
    assert window.last.id == 6 and window.completed == 6
    assert reader.last_cost.requests == 4


def test_the_expired_checkpoint_is_the_newest() -> None:
    script = Script(routes_of("checkpoint-expired"))
    with serving(script) as url:
        window, unread, _ = read(script, url)
    assert unread is None and window is not None
    last = window.last
    assert last is not None and (last.id, last.status) == (9, "failed")
    assert last.failure == "Checkpoint expired before completing."
    assert [v.acknowledged for v in last.vertices] == [1, 0, 0]
    assert window.last_completed is not None and window.last_completed.id == 1


# -- what cannot be read ------------------------------------------------------------------------


def off_job(script: Script) -> str:
    jid = job_id(script.routes)
    script.routes[f"/jobs/{jid}/checkpoints/config"] = (
        200,
        document("checkpoints-off", "/checkpoints/config"),
    )
    return jid


def test_checkpointing_off_is_said_plainly_and_not_asked_again(
    aligned: tuple[Script, str],
) -> None:
    script, url = aligned
    jid = off_job(script)
    window, unread, reader = read(script, url)
    assert window is None and unread is not None
    assert unread.kind == "checkpoints-unread" and unread.vertex == "job"
    assert unread.detail.startswith(
        f"checkpointing is off for this job (GET /jobs/{jid}/checkpoints/config: interval "
    )
    assert "execution.checkpointing.interval" in unread.detail
    again, twice, reader = read(script, url, reader)
    assert again is None and twice == unread  # every window's report says it
    assert reader.last_cost.requests == 0  # a job's checkpoint settings are fixed for its life


def test_a_flink_that_has_no_statistics_answers_404(aligned: tuple[Script, str]) -> None:
    """Flink 1.x answers a job without checkpointing 404 ("Checkpointing is not enabled")."""
    script, url = aligned
    jid = job_id(script.routes)
    text = (
        "org.apache.flink.runtime.rest.handler.RestHandlerException: Checkpointing is not "
        f"enabled for this job ({jid}).\n\tat org.apache.flink..."
    )
    script.routes[f"/jobs/{jid}/checkpoints/config"] = (404, {"errors": [text]})
    window, unread, reader = read(script, url)
    assert window is None and unread is not None
    assert unread.detail.startswith(
        f"checkpointing is off for this job (GET /jobs/{jid}/checkpoints/config: 404, "
        f"Checkpointing is not enabled for this job ({jid}).); enable it"
    )
    _, _, reader = read(script, url, reader)
    assert reader.last_cost.requests == 0


def test_a_5xx_after_the_retries_is_this_window_only(aligned: tuple[Script, str]) -> None:
    script, url = aligned
    jid = job_id(script.routes)
    script.queued[f"/jobs/{jid}/checkpoints"] = [BUSY] * 4
    window, unread, reader = read(script, url)
    assert window is None and unread is not None
    assert unread.detail.startswith("checkpoints not read: Flink at ")
    assert "answered HTTP 503 (Service temporarily unavailable due to an ongoing leader " in (
        unread.detail
    )
    assert f"to GET /jobs/{jid}/checkpoints, 4 times" in unread.detail
    assert "bpmon tries again" in unread.detail
    assert reader.last_cost.requests == 5  # the config, then four attempts
    window, unread, reader = read(script, url, reader)
    assert unread is None and window is not None and window.completed == 5


def test_a_5xx_on_a_checkpoints_details_is_read_again_next_window(
    aligned: tuple[Script, str],
) -> None:
    script, url = aligned
    jid = job_id(script.routes)
    script.queued[f"/jobs/{jid}/checkpoints/details/5/subtasks/{ENRICH}"] = [BUSY] * 4
    window, unread, reader = read(script, url)
    assert window is None and unread is not None and "HTTP 503" in unread.detail
    window, unread, reader = read(script, url, reader)
    assert unread is None and window is not None and window.last is not None
    assert len(window.last.vertices) == 3


def test_details_gone_from_flinks_history(aligned: tuple[Script, str]) -> None:
    script, url = aligned
    for path in [p for p in script.routes if "/details/" in p]:
        del script.routes[path]
    window, unread, _ = read(script, url)
    assert window is None and unread is not None
    assert "checkpoint 5's details are gone from Flink's history" in unread.detail
    assert "web.checkpoints.history" in unread.detail


def _set(doc: Any, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        doc = doc[int(key)] if key.isdigit() else doc[key]
    if value is ...:
        del doc[last]
    else:
        doc[int(last) if last.isdigit() else last] = value


@pytest.mark.parametrize(
    ("suffix", "path", "value", "named"),
    [
        ("/checkpoints/config", "mode", "twice", "mode = 'twice', not \"exactly_once\""),
        ("/checkpoints/config", "interval", "1 s", "interval = '1 s', not a number"),
        ("/checkpoints/config", "unaligned_checkpoints", "yes", "unaligned_checkpoints = 'yes'"),
        ("/checkpoints", "counts", ..., "counts = missing, not an object"),
        ("/checkpoints", "counts.completed", "5", "counts.completed = '5', not an integer"),
        ("/checkpoints", "counts.failed", 1.5, "counts.failed = 1.5, not an integer"),
        ("/checkpoints", "counts.failed", float("inf"), "counts.failed = inf, not an integer"),
        ("/checkpoints", "counts.failed", float("nan"), "counts.failed = nan, not an integer"),
        ("/checkpoints", "latest.completed", [], "latest.completed = [], not an object or null"),
        ("/checkpoints", "latest.completed.id", None, "latest.completed.id = missing"),
        ("/checkpoints", "latest", "none", "latest = 'none', not an object"),
        (f"/subtasks/{ENRICH}", "subtasks", {}, "subtasks = {}, not an array of objects"),
        (f"/subtasks/{ENRICH}", "subtasks.0.index", ..., "subtasks[0].index = missing"),
        (f"/subtasks/{ENRICH}", "subtasks.0.start_delay", "4 s", "subtasks[0].start_delay = '4 s'"),
        (f"/subtasks/{ENRICH}", "subtasks.1.checkpoint", ..., "subtasks[1].checkpoint = missing"),
        (f"/subtasks/{ENRICH}", "subtasks.0.alignment.duration", True, "duration = True"),
    ],
)
def test_a_document_of_another_shape_is_named_not_raised(
    aligned: tuple[Script, str], suffix: str, path: str, value: Any, named: str
) -> None:
    script, url = aligned
    [route] = [p for p in script.routes if p.endswith(suffix)]
    doc = copy.deepcopy(script.routes[route][1])
    _set(doc, path, value)
    script.routes[route] = (200, doc)
    window, unread, _ = read(script, url)
    assert window is None and unread is not None
    assert unread.detail.startswith(f"checkpoints not read: GET {route} answered "), unread
    assert named in unread.detail, unread.detail
    assert "report this with Flink 2.3.0's answer" in unread.detail
    assert "\n" not in unread.detail


@pytest.mark.parametrize("answer", ["<html>busy</html>", [], "null", 7])
def test_a_document_that_is_not_an_object(aligned: tuple[Script, str], answer: Any) -> None:
    script, url = aligned
    jid = job_id(script.routes)
    body = json.loads(answer) if answer == "null" else answer
    script.routes[f"/jobs/{jid}/checkpoints"] = (200, body)
    window, unread, _ = read(script, url)
    assert window is None and unread is not None
    assert unread.detail.startswith("checkpoints not read: "), unread.detail


def test_a_4xx_is_named(aligned: tuple[Script, str]) -> None:
    script, url = aligned
    jid = job_id(script.routes)
    script.routes[f"/jobs/{jid}/checkpoints"] = (403, {"errors": ["Forbidden"]})
    window, unread, _ = read(script, url)
    assert window is None and unread is not None
    assert unread.detail.startswith(
        f"checkpoints not read: Flink at {url} answered GET /jobs/{jid}/checkpoints with HTTP 403"
    )


# -- through the target and the diagnosis ------------------------------------------------------


def test_a_window_never_fails_for_its_checkpoints(aligned: tuple[Script, str]) -> None:
    script, url = aligned
    jid = job_id(script.routes)
    script.routes[f"/jobs/{jid}/checkpoints"] = (500, {"errors": ["NullPointerException"]})
    target = FlinkTarget(url, rest=FlinkRest(url, sleep=no_sleep))
    target.start()
    observation = target.observe(samples=2, interval_ms=20)
    assert observation.checkpoints is None and observation.vertices
    [unread] = [n for n in observation.notes if n.kind == "checkpoints-unread"]
    assert "HTTP 500 (NullPointerException)" in unread.detail
    assert target.last_checkpoint_cost.requests == 5  # the config, then four attempts


def test_the_sampling_note_counts_the_checkpoints_reading(aligned: tuple[Script, str]) -> None:
    _, url = aligned
    target = FlinkTarget(url)
    target.start()
    observation = target.observe(samples=2, interval_ms=20)
    assert observation.checkpoints is not None and observation.checkpoints.completed == 5
    [sampling] = [n for n in observation.notes if n.kind == "sampling"]
    assert " (5 of them for the checkpoints, " in sampling.detail, sampling.detail
    assert target.last_checkpoint_cost.requests == 5


def test_the_recorded_aligned_job_is_checkpoint_backpressure(
    aligned: tuple[Script, str], tmp_path: Path
) -> None:
    _, url = aligned
    ended = drain(
        monitor_flink(url, samples=4, interval_ms=20, settings=Settings(runs_dir=tmp_path))
    )
    [report] = ended.reports
    causes = report.root_causes or ()
    assert causes and (causes[0].vertex, causes[0].kind) == ("enrich", "slow-operator")
    [held] = [f for f in report.findings if f.kind == "checkpoint-backpressure"]
    assert held.vertex == "enrich"
    assert "checkpoint 5 took 4,073 ms" in held.detail
    assert report.checkpoints is not None and report.checkpoints.last is not None
    assert report.checkpoints.last.start_delay_ms == 4069


def test_the_recorded_unaligned_job_has_no_checkpoint_finding(tmp_path: Path) -> None:
    with serving(routes_of("checkpoint-unaligned")) as url:
        ended = drain(
            monitor_flink(url, samples=4, interval_ms=20, settings=Settings(runs_dir=tmp_path))
        )
    [report] = ended.reports
    assert report.checkpoints is not None and report.checkpoints.mode == "unaligned"
    last = report.checkpoints.last
    assert last is not None and last.persisted_bytes > 0 and (last.start_delay_ms or 0) < 100
    assert not [f for f in report.findings if f.kind.startswith("checkpoint")]
