"""The resource-starved and spilling causes, on reports of real runs of small jobs.

Each job runs on bpmon's runtime through the service for well under two seconds (10 samples 10 ms
apart after a short warm-up), so the causes are read from real task states and spill metrics.
"""

from __future__ import annotations

from pathlib import Path

from bpmon.model.signals import TaskScheduling
from bpmon.model.values import Report, SubtaskWindow
from bpmon.rules.scheduling import scheduling_causes
from bpmon.scenario import load_scenario, parse_scenario
from bpmon.service.facade import Settings, drain, run_scenario
from bpmon.service.whatif import changed, recommended_changes, verdict

from .figures import evidence_problems, texts
from .observations import edge, observation, sub, vertex

MONITOR = "[monitor]\nwarmup_s = 0.6\nsamples = 10\ninterval_ms = 10\n"


def report_of(text: str, tmp_path: Path, duration_s: float = 1.0) -> Report:
    scenario = parse_scenario(text)
    ended = drain(run_scenario(scenario, Settings(runs_dir=tmp_path), duration_s=duration_s))
    assert ended.leaks == ()
    assert evidence_problems(ended.reports[0]) == []
    return ended.reports[0]


STARVED = f"""
name = "starved"
[network]
task_managers = 1
[cluster]
slots_per_task_manager = 2
slot_request_timeout_s = 30
{MONITOR}
[[operators]]
name = "a"
kind = "source"
parallelism = 2
rate = 200
slot_sharing_group = "a"
[[operators]]
name = "b"
kind = "source"
parallelism = 1
rate = 200
slot_sharing_group = "b"
[[operators]]
name = "b-out"
kind = "sink"
slot_sharing_group = "b"
inputs = [{{ from = "b" }}]
"""


def test_a_region_waiting_for_slots_is_resource_starved(tmp_path: Path) -> None:
    report = report_of(STARVED, tmp_path)
    [cause] = [c for c in report.root_causes or () if c.kind == "resource-starved"]
    assert (cause.vertex, cause.subtasks) == ("b", (0,))
    assert texts(cause)[0].startswith("region 1 (b, b-out) is not running: its 2 subtasks")
    assert texts(cause)[1] == (
        "1 of the 1 slots it needs is not free (2 slots in the cluster, the others held by "
        "tasks that run)"
    )
    assert cause.recommendation.startswith("add 1 slot ([cluster] slots_per_task_manager")
    assert "lower the parallelism" not in cause.recommendation  # b has one subtask already


SPILL_MONITOR = "[monitor]\nwarmup_s = 1.0\nsamples = 25\ninterval_ms = 40\n"
"""A second of warm-up (the partition fills to its threshold), then a 1 s window."""


def spill_job(exchange: str, cost_us: int) -> str:
    return f"""
name = "spill"
mode = "batch"
{SPILL_MONITOR}
[[operators]]
name = "src"
kind = "source"
parallelism = 1
rate = 4000
records = 100000
[[operators]]
name = "work"
kind = "sink"
cost_us = {cost_us}
inputs = [{{ from = "src", exchange = "{exchange}" }}]
"""


def test_a_hybrid_partition_whose_consumer_lags_is_spilling(tmp_path: Path) -> None:
    report = report_of(spill_job("hybrid-selective", 1000), tmp_path, 2.2)
    [cause] = [c for c in report.root_causes or () if c.kind == "spilling"]
    assert cause.vertex == "src"
    assert "hybrid-selective partitions to work spill" in texts(cause)[0]
    assert "work is busy" in texts(cause)[2]
    assert cause.recommendation.startswith("let work consume in time")


def test_full_spilling_is_named_and_selective_recommended(tmp_path: Path) -> None:
    report = report_of(spill_job("hybrid-full", 10), tmp_path, 2.2)
    [cause] = [c for c in report.root_causes or () if c.kind == "spilling"]
    assert 'exchange = "hybrid-selective"' in cause.recommendation


def test_a_blocking_exchange_writes_to_disk_by_design_and_is_no_cause(tmp_path: Path) -> None:
    report = report_of(spill_job("blocking", 10), tmp_path, 2.2)
    assert not [c for c in report.root_causes or () if c.kind in ("spilling", "resource-starved")]
    [source] = [v for v in report.vertices if v.name == "src"]
    spill = source.subtasks[0].metrics.spill
    assert spill is not None and spill.written_bytes_per_s > 0  # it does spill


def _flink_sub(index: int, state: str, free: int, failures: int = 0) -> SubtaskWindow:
    """A subtask as the Flink collector gives it: a state and the cluster's free slots."""
    scheduling = TaskScheduling(
        state=state, waited_s=12.0, slots_total=4, slots_free=free, slot_failures=failures
    )
    return sub(index, busy=0.5, rin=100, metrics={"scheduling": scheduling})


def test_flink_states_and_free_slots_name_the_waiting_vertex() -> None:
    """Flink says no region and no shortfall: the states and free slots are enough."""
    running = vertex("src", *(_flink_sub(i, "RUNNING", 0) for i in range(4)))
    waiting = vertex("wide", *(_flink_sub(i, "SCHEDULED", 0) for i in range(5)),
                     inputs=[edge("src")])  # fmt: skip
    [cause] = scheduling_causes(observation(running, waiting))
    assert (cause.kind, cause.vertex) == ("resource-starved", "wide")
    assert cause.subtasks == tuple(range(5))
    assert "waiting 12.0 s for 5 slots" in texts(cause)[0]
    assert texts(cause)[1].startswith("5 of the 5 slots it needs are not free (4 slots in")


def test_on_flink_the_slots_are_flinks_and_the_one_wide_vertex_is_sized() -> None:
    """Nothing of the job runs (6 slots free); only "work" is wider than they: lowering it to 6
    fits, so that is the recommended parallelism, and the slots are named as Flink names them."""
    source = vertex("events", _flink_sub(0, "SCHEDULED", 6))
    work = vertex("work", *(_flink_sub(i, "SCHEDULED", 6) for i in range(8)),
                  inputs=[edge("events")])  # fmt: skip
    [cause] = scheduling_causes(observation(source, work, source="flink"))
    assert (cause.vertex, cause.recommended_parallelism) == ("work", 6)
    assert cause.recommendation.startswith(
        "add 2 slots (taskmanager.numberOfTaskSlots, or more TaskManagers), or lower the "
        "parallelism of work to 6;"
    )
    assert not [line for line in texts(cause) if "gave up" in line]
    failed = vertex("work", *(_flink_sub(i, "SCHEDULED", 6, failures=3) for i in range(8)),
                    inputs=[edge("events")])  # fmt: skip
    [cause] = scheduling_causes(observation(source, failed, source="flink"))
    assert texts(cause)[-1] == (
        "the scheduler gave up waiting for the slots 3 times and restarted the job "
        "(NoResourceAvailableException in its exception history)"
    )


def test_two_wide_vertices_are_both_named_and_no_parallelism_is_recommended(
    tmp_path: Path,
) -> None:
    """b and b-out share region 1's slot: lowering b alone would leave b-out waiting."""
    wide = STARVED.replace('parallelism = 1\nrate = 200\nslot_sharing_group = "b"',
                           'parallelism = 2\nrate = 100\nslot_sharing_group = "b"')  # fmt: skip
    wide = wide.replace('kind = "sink"\n', 'kind = "sink"\nparallelism = 2\n')
    report = report_of(wide, tmp_path)
    [cause] = [c for c in report.root_causes or () if c.kind == "resource-starved"]
    assert "lower the parallelism of b and b-out to " in cause.recommendation
    assert cause.recommended_parallelism is None


def test_the_recommended_lower_parallelism_lets_the_waiting_region_run(tmp_path: Path) -> None:
    """3 slots, 2 held by a; b needs 3 of them: lowered to the 1 free slot, it runs (re-run)."""
    path = tmp_path / "starved.toml"
    three = STARVED.replace("slots_per_task_manager = 2", "slots_per_task_manager = 3")
    path.write_text(three.replace("parallelism = 1\nrate = 200", "parallelism = 3\nrate = 70"))
    before = report_of(path.read_text(), tmp_path)
    [cause] = [c for c in before.root_causes or () if c.kind == "resource-starved"]
    assert (cause.vertex, cause.recommended_parallelism) == ("b", 1)
    changes = recommended_changes(before)
    assert [str(c) for c in changes] == ["b.parallelism=1"]
    after_scenario = changed(load_scenario(path), changes)
    assert after_scenario.operator("b").rate == 210  # the same records offered, on one subtask
    after = drain(run_scenario(after_scenario, Settings(runs_dir=tmp_path), duration_s=1.0))
    assert after.leaks == ()
    assert verdict(before, after.reports[0], changes).removed, after.reports[0].root_causes


def test_waiting_subtasks_with_free_slots_are_only_deploying() -> None:
    """A vertex about to deploy, with slots free, is not starved (it will run in a moment)."""
    deploying = vertex("wide", *(_flink_sub(i, "DEPLOYING", 6) for i in range(5)))
    assert scheduling_causes(observation(deploying)) == []


def test_what_flink_shows_still_names_a_region_short_of_slots(tmp_path: Path) -> None:
    """--observe flink: no region and no shortfall, only states and free slots."""
    scenario = parse_scenario(STARVED)
    events = run_scenario(scenario, Settings(runs_dir=tmp_path), duration_s=1.0, observe="flink")
    [cause] = [
        c for c in drain(events).reports[0].root_causes or () if c.kind == "resource-starved"
    ]
    assert (cause.vertex, cause.subtasks) == ("b", (0,))
    assert texts(cause)[1].startswith("1 of the 1 slots it needs is not free (2 slots in")


def test_spilling_is_not_named_from_what_flink_shows(tmp_path: Path) -> None:
    scenario = parse_scenario(spill_job("hybrid-full", 10))
    events = run_scenario(scenario, Settings(runs_dir=tmp_path), duration_s=2.2, observe="flink")
    report = drain(events).reports[0]
    assert not [c for c in report.root_causes or () if c.kind == "spilling"]
    [note] = [f for f in report.findings if f.kind == "unobserved"]
    assert "spill figures (spilling cannot be named)" in note.detail
    assert "per-channel readings" in note.detail
