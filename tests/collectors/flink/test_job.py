"""The Flink target across what a long-running job goes through, on responses recorded from a
real Flink 2.3 (``fixtures/``, ``record.py``) served by a real HTTP server whose answers change
between windows: a rescale 2 -> 3 -> 1 by the adaptive scheduler, a finished source, two
vertices of one name, a restart, a cancel, a failure."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bpmon.collectors.flink.target import FlinkTarget
from bpmon.model.errors import JobError, JobOverError, UnavailableError
from bpmon.model.values import Observation
from bpmon.service.facade import Settings, drain, monitor_flink

from .fake_flink import Script, job_id, recorded, serving


@contextmanager
def watching(folder: str) -> Iterator[tuple[FlinkTarget, Script]]:
    """A started target on the recording ``folder``, and the script to change its answers."""
    script = Script(recorded(folder))
    with serving(script) as url:
        target = FlinkTarget(url)
        target.start()
        yield target, script


def subtasks(observation: Observation, vertex: str) -> list[int]:
    return [s.index for s in observation.vertex(vertex).subtasks]


def notes(observation: Observation, kind: str) -> list[str]:
    return [n.detail for n in observation.notes if n.kind == kind]


def test_a_rescale_up_shows_the_new_subtask_and_says_so() -> None:
    with watching("rescale/before") as (target, script):
        before = target.observe(samples=3, interval_ms=20)
        script.routes.update(recorded("rescale/up"))
        after = target.observe(samples=3, interval_ms=20)
        again = target.observe(samples=3, interval_ms=20)
    assert subtasks(before, "enrich") == [0, 1] and notes(before, "rescaled") == []
    assert subtasks(after, "enrich") == [0, 1, 2]
    assert after.vertex("enrich").parallelism == 3
    assert notes(after, "rescaled") == ["enrich: parallelism 2 → 3"]
    assert notes(again, "rescaled") == []  # said once, in the window after the change
    enrich = after.vertex("enrich").subtasks
    assert [s.thread for s in enrich] == ["enrich (1/3)#1", "enrich (2/3)#1", "enrich (3/3)#0"]
    # the new attempts' threads are sampled in every dump taken (a dump slower than its slot on a
    # loaded machine is skipped, so not always 3)
    assert all(s.samples == after.window.samples >= 1 for s in enrich)
    assert all(s.metrics.busy_ratio is not None for s in enrich)  # and their metrics read


def test_a_rescale_is_said_in_the_first_window_given_even_if_one_failed_between() -> None:
    with watching("rescale/before") as (target, script):
        target.observe(samples=2, interval_ms=20)
        script.routes.update(recorded("rescale/up"))
        status = f"/jobs/{job_id(script.routes)}/status"
        script.queued[status] = [(200, {"status": "RUNNING"}), (200, {"status": "RESTARTING"})]
        with pytest.raises(UnavailableError):
            target.observe(samples=2, interval_ms=20)  # read the new graph, then restarted
        after = target.observe(samples=2, interval_ms=20)
    assert notes(after, "rescaled") == ["enrich: parallelism 2 → 3"]


def test_a_rescale_down_leaves_no_phantom_subtask() -> None:
    with watching("rescale/before") as (target, script):
        target.observe(samples=2, interval_ms=20)
        script.routes.update(recorded("rescale/down"))
        after = target.observe(samples=2, interval_ms=20)
    assert subtasks(after, "enrich") == [0]
    assert notes(after, "rescaled") == ["enrich: parallelism 2 → 1"]
    assert after.vertex("enrich").subtasks[0].thread == "enrich (1/1)#2"


def test_a_rescale_re_reads_the_metric_names_but_not_the_embedded_plan() -> None:
    with watching("rescale/before") as (target, script):
        jid = job_id(script.routes)
        target.observe(samples=1, interval_ms=20)
        lists = script.count("/metrics")
        script.routes.update(recorded("rescale/up"))
        target.observe(samples=1, interval_ms=20)
    assert script.count(f"/jobs/{jid}/plan") == 0  # GET /jobs/{id} embeds it
    # the metric values are read twice per vertex per window; the list once, for enrich only
    assert script.count("/metrics") - lists == 2 * 3 + 1


def test_a_finished_source_is_left_out_and_said() -> None:
    """Flink 2.3 shows the finished subtask FINISHED, with no thread and no metrics left."""
    with watching("partly-bounded") as (target, _):
        observation = target.observe(samples=3, interval_ms=20)
    names = [v.name for v in observation.vertices]
    assert names == ["Source: right -> parse", "merge", "sink: Writer"]
    assert [e.source for e in observation.vertex("merge").inputs] == ["Source: right -> parse"]
    assert notes(observation, "finished") == [
        "Source: left -> parse: all 1 subtask(s) FINISHED (a bounded input read to its end); "
        "left out of the window"
    ]
    taken = observation.window.samples  # all 3 but where a slow dump overran its slot
    assert taken >= 1 and all(s.samples == taken for v in observation.vertices for s in v.subtasks)


def test_the_service_diagnoses_a_job_with_a_finished_source(tmp_path: Path) -> None:
    with serving(recorded("partly-bounded")) as url:
        ended = drain(
            monitor_flink(url, samples=3, interval_ms=20, settings=Settings(runs_dir=tmp_path))
        )
    [report] = ended.reports
    assert [v.name for v in report.vertices] == ["Source: right -> parse", "merge", "sink: Writer"]
    assert "finished" in {f.kind for f in report.findings}


def test_two_vertices_of_one_name_stay_two() -> None:
    with watching("same-names") as (target, _):
        observation = target.observe(samples=3, interval_ms=20)
    names = [v.name for v in observation.vertices]
    assert names == ["Source: numbers -> parse", "work", "work#2", "sink: Writer"]
    assert [e.source for e in observation.vertex("work#2").inputs] == ["work"]  # no self-loop
    assert [e.source for e in observation.vertex("sink: Writer").inputs] == ["work#2"]
    # their threads are both "work (i/2)#0" on one task manager: not guessed, left out
    for name in ("work", "work#2"):
        assert all(s.samples == 0 for s in observation.vertex(name).subtasks)
    taken = observation.window.samples  # all 3 but where a slow dump overran its slot
    assert taken >= 1
    assert all(s.samples == taken for s in observation.vertex("sink: Writer").subtasks)
    [ambiguous] = notes(observation, "ambiguous-threads")
    assert ambiguous.startswith("work, work#2: Flink names their task threads alike")
    # the recorded job's first "work" sleeps 1 ms a record, the second nothing
    work, work2 = (observation.vertex(n).subtasks for n in ("work", "work#2"))
    assert min(s.metrics.busy_ratio or 0 for s in work) > 0.9
    assert max(s.metrics.busy_ratio or 0 for s in work2) < 0.1


def test_the_service_reports_two_same_named_vertices_apart(tmp_path: Path) -> None:
    """(Which of them is the bottleneck is checked on the real cluster: ``test_e2e.py``.)"""
    with serving(recorded("same-names")) as url:
        ended = drain(
            monitor_flink(url, samples=3, interval_ms=20, settings=Settings(runs_dir=tmp_path))
        )
    [report] = ended.reports
    shown = {v.name: [e.source for e in v.inputs] for v in report.vertices}
    assert shown["work"] == ["Source: numbers -> parse"] and shown["work#2"] == ["work"]
    assert [v.parallelism for v in report.vertices if v.name.startswith("work")] == [2, 2]


# -- state changes -------------------------------------------------------------------------------


def status(state: str) -> tuple[int, dict[str, str]]:
    return 200, {"status": state}


def test_a_restarting_job_is_a_gap_and_a_running_one_is_watched_again() -> None:
    with watching("rescale/before") as (target, script):
        jid = job_id(script.routes)
        script.routes[f"/jobs/{jid}/status"] = status("RESTARTING")
        with pytest.raises(UnavailableError, match=r"is RESTARTING \(a failover\)"):
            target.observe(samples=2, interval_ms=20)
        with pytest.raises(UnavailableError, match="RESTARTING"):
            target.wait(0)
        script.routes[f"/jobs/{jid}/status"] = status("RUNNING")
        assert target.observe(samples=2, interval_ms=20).window.samples == 2


def test_a_job_that_restarts_during_a_window_gives_no_window() -> None:
    """The status is read when the window starts and again when it ends."""
    with watching("rescale/before") as (target, script):
        jid = job_id(script.routes)
        script.queued[f"/jobs/{jid}/status"] = [status("RUNNING"), status("RESTARTING")]
        with pytest.raises(UnavailableError, match="RESTARTING"):
            target.observe(samples=2, interval_ms=20)


def test_a_window_whose_threads_are_not_where_flink_placed_them_is_no_window() -> None:
    """The placement read at the start says attempt 1; every dump shows attempt 0: the job
    restarted between the two."""
    with watching("rescale/before") as (target, script):
        jid = job_id(script.routes)
        path = next(p for p in script.routes if p.startswith(f"/jobs/{jid}/vertices/"))
        doc = script.routes[path][1]
        later = [{**s, "attempt": 1} for s in doc["subtasks"]]
        script.routes[path] = (200, {**doc, "subtasks": later})
        with pytest.raises(UnavailableError, match=r"restarted while its window was read: "):
            target.observe(samples=2, interval_ms=20)


def test_a_job_restarted_in_the_middle_of_a_window_gives_no_window() -> None:
    """The first dump shows the recorded job's threads, the next ones those after its rescale
    (other attempts): the window is not half-read."""
    with watching("rescale/before") as (target, script):
        dump = next(p for p in script.routes if p.endswith("/thread-dump"))
        later = recorded("rescale/up")[dump]
        script.queued[dump] = [script.routes[dump], later, later]
        # 250 ms apart, so no dump is skipped on a loaded machine (a dump overrunning its slot
        # is skipped, and then the window counts 2); either way, one restarted thread is named
        with pytest.raises(UnavailableError, match=r"\[0\] was in 1 of the [23] thread dumps"):
            target.observe(samples=3, interval_ms=250)


@pytest.mark.parametrize(
    ("state", "error", "text"),
    [
        ("CANCELED", JobOverError, "was CANCELED"),
        ("FINISHED", JobOverError, "FINISHED (its input ended, or it was stopped"),
        ("FAILED", JobError, "FAILED: java.lang.RuntimeException: boom"),
    ],
)
def test_a_job_that_ended_ends_the_watch(state: str, error: type[Exception], text: str) -> None:
    with watching("rescale/before") as (target, script):
        jid = job_id(script.routes)
        script.routes[f"/jobs/{jid}/status"] = status(state)
        trace = "java.lang.RuntimeException: boom\n\tat BpmonFlinkJobs.main(BpmonFlinkJobs.java:1)"
        script.routes[f"/jobs/{jid}/exceptions"] = (
            200,
            {"exceptionHistory": {"entries": [{"stacktrace": trace}]}},
        )
        with pytest.raises(error, match=text.replace("(", r"\(")):
            target.observe(samples=2, interval_ms=20)  # reads the state now, as every window
        with pytest.raises(error):
            target.wait(0)  # and between bursts the answer is kept


def test_a_job_the_cluster_forgot_ends_the_watch_as_failed() -> None:
    with watching("rescale/before") as (target, script):
        jid = job_id(script.routes)
        del script.routes[f"/jobs/{jid}/status"]
        del script.routes[f"/jobs/{jid}"]
        with pytest.raises(JobError, match="is no longer on the Flink cluster"):
            target.observe(samples=2, interval_ms=20)


def test_wait_reads_the_state_at_most_once_a_second() -> None:
    """The service asks every quarter second between bursts."""
    now = [0.0]
    script = Script(recorded("rescale/before"))
    with serving(script) as url:
        target = FlinkTarget(url, clock=lambda: now[0], sleep=lambda s: None)
        for _ in range(40):  # ten seconds
            target.wait(0)
            now[0] += 0.25
    assert script.count("/status") == 10
