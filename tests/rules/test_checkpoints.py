"""The checkpoint rules on checkpoints built by hand: what the report keeps of a checkpoint, and
where each finding starts and stops. (The checkpoint cases of the corpus run real jobs:
``tests/diagnosis/test_checkpoint_corpus.py``.)"""

from __future__ import annotations

from bpmon.model.checkpoints import (
    Checkpoint,
    CheckpointWindow,
    SubtaskCheckpoint,
    VertexCheckpoint,
)
from bpmon.model.values import (
    Metrics,
    RootCause,
    SubtaskStatus,
    TargetSettings,
    VertexStatus,
)
from bpmon.rules.checkpoints import checkpoint_findings, checkpoint_report
from bpmon.rules.config import CheckpointRules

RULES = CheckpointRules()


def sub(
    index: int,
    delay: float | None,
    align: float = 0.0,
    sync: float = 0.0,
    upload: float = 0.0,
    acked: bool = True,
) -> SubtaskCheckpoint:
    if delay is None:
        return SubtaskCheckpoint(index=index, acknowledged=False)
    return SubtaskCheckpoint(index, acked, delay, align, sync, upload, 0, 0, 0)


def window(
    *vertices: tuple[str, list[SubtaskCheckpoint]],
    duration: float,
    failed: bool = False,
    mode: str = "aligned",
) -> CheckpointWindow:
    checkpoint = Checkpoint(
        id=7,
        status="failed" if failed else "completed",
        duration_ms=duration,
        vertices=tuple(VertexCheckpoint(name, tuple(subs)) for name, subs in vertices),
        failure="expired before completing, timeout_ms = 4000" if failed else None,
    )
    return CheckpointWindow(
        mode="aligned" if mode == "aligned" else "unaligned",
        interval_ms=1000.0,
        completed=3,
        failed=2 if failed else 0,
        last_completed=None if failed else checkpoint,
        last_failed=checkpoint if failed else None,
    )


CAUSE = RootCause("enrich", "slow-operator", (0, 1), 1.0, recommendation="Give enrich more.")


def findings(
    w: CheckpointWindow,
    causes: tuple[RootCause, ...] = (CAUSE,),
    vertices: tuple[VertexStatus, ...] = (),
    debloat: bool = False,
) -> dict[str, str]:
    report = checkpoint_report(w)
    found = checkpoint_findings(w, report, causes, vertices, TargetSettings(debloat=debloat), RULES)
    return {f.kind: f"{f.vertex}: {f.detail}" for f in found}


def test_a_vertex_shows_its_slowest_subtask_and_one_never_reached_counts_the_whole_duration() -> (
    None
):
    w = window(
        ("source", [sub(0, 0.1), sub(1, 0.2)]),
        ("enrich", [sub(0, 2400.0, 1500.0, acked=False), sub(1, None)]),
        duration=4000.0,
        failed=True,
    )
    report = checkpoint_report(w)
    source, enrich = report.vertices
    assert (source.start_delay_ms, source.acknowledged) == (0.2, 2)
    assert (enrich.start_delay_ms, enrich.alignment_ms, enrich.acknowledged) == (4000.0, None, 0)
    assert report.last is not None and report.last.barrier_wait_ms == 4000.0
    assert report.last.waiting_share == 1.0 and report.last.status == "failed"


def test_barriers_waiting_most_of_a_slow_checkpoint_are_the_root_cause_s_finding() -> None:
    w = window(("source", [sub(0, 0.1)]), ("enrich", [sub(0, 1800.0, 900.0)]), duration=2800.0)
    found = findings(w)
    assert list(found) == ["checkpoint-backpressure"]
    text = found["checkpoint-backpressure"]
    assert text.startswith("enrich: checkpoint 7 took 2,800 ms, 96% of it waiting")
    assert "fix the bottleneck first: Give enrich more" in text
    assert "unaligned checkpoints with an aligned timeout" in text  # aligned, so offered
    assert "buffer debloating" in text and "overdraft" not in text  # nothing hard-blocked
    assert "debloating" not in findings(w, debloat=True)["checkpoint-backpressure"]


def test_a_quick_checkpoint_or_one_without_a_cause_is_not_blamed_on_backpressure() -> None:
    quick = window(("enrich", [sub(0, 600.0, 300.0)]), duration=950.0)
    assert findings(quick) == {}
    slow = window(("enrich", [sub(0, 1800.0, 900.0)]), duration=2800.0)
    assert findings(slow, causes=()) == {}  # waiting, but nothing named to tie it to


def test_overdraft_is_a_remedy_only_where_a_producer_is_blocked_mid_record() -> None:
    w = window(("explode", [sub(0, 2900.0)]), duration=3000.0, mode="unaligned")

    def producer(hard: float, total: float) -> VertexStatus:
        metrics = Metrics(hard_backpressured_ratio=hard, backpressured_time_ratio=total)
        return VertexStatus("explode", 1, subtasks=(SubtaskStatus(0, metrics=metrics),))

    blocked = findings(w, vertices=(producer(0.95, 1.0),))["checkpoint-backpressure"]
    assert "overdraft buffers: explode is blocked mid-record in a buffer request 95%" in blocked
    assert "unaligned checkpoints with an aligned timeout" not in blocked  # unaligned already
    assert "debloating" not in blocked  # barriers overtake the data: less of it would not help
    soft = findings(w, vertices=(producer(0.05, 1.0),))["checkpoint-backpressure"]
    assert "overdraft" not in soft


def test_a_checkpoint_spent_in_its_snapshot_is_slow_for_its_own_reasons() -> None:
    w = window(
        ("source", [sub(0, 0.1)]),
        ("aggregate", [sub(0, 12.0, 0.0, 150.0, 3000.0), sub(1, 11.0, 0.0, 150.0, 2990.0)]),
        duration=3170.0,
    )
    found = findings(w, causes=())
    assert list(found) == ["checkpoint-slow"]
    assert found["checkpoint-slow"].startswith("aggregate: checkpoint 7 took 3,170 ms, 99% of it")
    assert "3,000 ms" in found["checkpoint-slow"]  # its largest async phase
    assert "checkpoint-backpressure" not in findings(w)  # even with a cause elsewhere


def test_a_failed_checkpoint_neither_explains_is_named_with_its_counts() -> None:
    w = window(
        ("enrich", [sub(0, 200.0, 100.0), sub(1, 250.0)]),
        duration=4000.0,
        failed=True,
    )
    found = findings(w, causes=())
    assert list(found) == ["checkpoint-failed"]
    assert "3 completed and 2 failed so far" in found["checkpoint-failed"]


def test_one_subtask_far_behind_its_siblings_is_skew_tied_to_the_cause_that_names_it() -> None:
    subtasks = [sub(0, 2600.0), sub(1, 20.0), sub(2, 25.0), sub(3, 30.0)]
    w = window(("aggregate", subtasks), duration=2700.0)
    skew = RootCause("aggregate", "data-skew", (0,), 1.0, recommendation="Spread the key.")
    found = findings(w, causes=(skew,))
    assert (
        "subtask 0 of aggregate got checkpoint 7's first barrier 2,600 ms"
        in found["checkpoint-skew"]
    )
    assert "the data-skew at subtask 0" in found["checkpoint-skew"]
    assert "most likely data skew" in findings(w, causes=())["checkpoint-skew"]
    # three times the median, but not 500 ms more: no skew
    near = window(("aggregate", [sub(0, 400.0), sub(1, 90.0), sub(2, 100.0)]), duration=500.0)
    assert "checkpoint-skew" not in findings(near)
