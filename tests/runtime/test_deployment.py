"""Deployment: the frozen execution plan, and a job that builds exactly what the plan says.

Expected plans are written out by hand from the placement rule (slot sharing: subtask i of every
vertex of a group in the group's slot i, groups numbered one after the other, slot k on task
manager k mod task managers) and the exchange rules (one
partition per producing subtask and edge; one subpartition per consumer, one for ``forward``).
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

from bpmon.model.errors import ConfigError, JobError
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.deployment import (
    ChannelPlan,
    ExecutionPlan,
    plan_deployment,
    slot_placement,
)
from bpmon.runtime.gate import LocalInputChannel
from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import DIAMOND, StopJob

FORWARD = """
name = "forward"
[network]
task_managers = 2
[[operators]]
name = "a"
kind = "source"
parallelism = 3
rate = 10
[[operators]]
name = "b"
kind = "sink"
parallelism = 3
inputs = [{ from = "a" }]
"""


@pytest.mark.parametrize(
    ("tms", "placement"),
    [
        (1, {"source": (0, 0), "map": (0, 0, 0), "sink": (0,)}),
        (2, {"source": (0, 1), "map": (0, 1, 0), "sink": (0,)}),
        (3, {"source": (0, 1), "map": (0, 1, 2), "sink": (0,)}),
    ],
)
def test_subtask_i_of_every_vertex_of_a_group_shares_slot_i(
    tms: int, placement: dict[str, tuple[int, ...]]
) -> None:
    scenario = parse_scenario(DIAMOND.format(tms=tms))
    assert slot_placement(scenario) == (
        placement,
        {"source": (0, 1), "map": (0, 1, 2), "sink": (0,)},
    )
    plan = plan_deployment(scenario)
    assert [s.name for s in plan.subtasks] == [
        "source (1/2)",
        "source (2/2)",
        "map (1/3)",
        "map (2/3)",
        "map (3/3)",
        "sink (1/1)",
    ]
    assert plan.placement() == {v: list(tms) for v, tms in placement.items()}


def test_partitions_gates_and_connections_of_a_two_task_manager_job() -> None:
    plan = plan_deployment(parse_scenario(DIAMOND.format(tms=2)))
    # source [0, 1], map [0, 1, 0], sink [0]
    assert [(p.name, p.task_manager, p.consumers) for p in plan.partitions] == [
        ("source (1/2) -> map", 0, (0, 1, 2)),
        ("source (2/2) -> map", 1, (0, 1, 2)),
        ("map (1/3) -> sink", 0, (0,)),
        ("map (2/3) -> sink", 1, (0,)),
        ("map (3/3) -> sink", 0, (0,)),
    ]
    gates = {g.name: (g.task_manager, g.channels) for g in plan.gates}
    assert list(gates) == [
        "source -> map (1/3)",
        "source -> map (2/3)",
        "source -> map (3/3)",
        "map -> sink (1/1)",
    ]
    assert gates["source -> map (2/3)"] == (
        1,
        (ChannelPlan(0, 1, remote=True), ChannelPlan(1, 1, remote=False)),
    )
    assert gates["map -> sink (1/1)"] == (
        0,
        (
            ChannelPlan(2, 0, remote=False),
            ChannelPlan(3, 0, remote=True),
            ChannelPlan(4, 0, remote=False),
        ),
    )
    # credit: one connection per pair of task managers, in the order channels first need them
    assert plan.connections == ((1, 0, 0), (0, 1, 0))
    assert {g.connection_index for g in plan.gates} == {0}


def test_under_tcp_each_intermediate_result_has_its_own_connections() -> None:
    """Flink before 1.5: a connection per remote task manager and intermediate result."""
    tcp = DIAMOND.format(tms=2).replace("[network]", '[network]\nflow_control = "tcp"')
    plan = plan_deployment(parse_scenario(tcp))
    index = {g.consumer: g.connection_index for g in plan.gates}
    assert {g.connection_index for g in plan.gates if g.consumer == "map"} == {index["map"]}
    assert index["map"] != index["sink"]
    # source -> map crosses 1->0 (map 1/3 and 3/3) and 0->1 (map 2/3); map -> sink crosses 1->0
    assert plan.connections == (
        (1, 0, index["map"]),
        (0, 1, index["map"]),
        (1, 0, index["sink"]),
    )
    assert plan_deployment(parse_scenario(tcp)) == plan  # drawn from the seed: repeatable
    reseeded = plan_deployment(
        parse_scenario(tcp.replace('name = "placement"', 'seed = 1\nname = "placement"'))
    )
    assert {g.connection_index for g in reseeded.gates} != set(index.values())


def test_a_forward_edge_in_one_slot_sharing_group_stays_on_its_task_manager() -> None:
    plan = plan_deployment(parse_scenario(FORWARD))
    assert [p.consumers for p in plan.partitions] == [(0,), (1,), (2,)]
    assert [g.channels for g in plan.gates] == [
        (ChannelPlan(0, 0, remote=False),),
        (ChannelPlan(1, 0, remote=False),),
        (ChannelPlan(2, 0, remote=False),),
    ]
    assert plan.connections == ()


def test_forward_reads_the_one_subpartition_of_the_same_index_even_across_the_network() -> None:
    apart = FORWARD.replace("rate = 10", 'rate = 10\nslot_sharing_group = "read"')
    plan = plan_deployment(parse_scenario(apart))
    assert [p.consumers for p in plan.partitions] == [(0,), (1,), (2,)]
    assert [g.channels for g in plan.gates] == [
        (ChannelPlan(0, 0, remote=True),),
        (ChannelPlan(1, 0, remote=True),),
        (ChannelPlan(2, 0, remote=True),),
    ]
    # a in "read": slots 0-2 on task managers 0, 1, 0; b in "default": slots 3-5 on 1, 0, 1
    assert [s.slot for s in plan.subtasks] == [0, 1, 2, 3, 4, 5]


def test_the_plan_is_a_frozen_value() -> None:
    scenario = parse_scenario(DIAMOND.format(tms=2))
    plan = plan_deployment(scenario)
    assert plan == plan_deployment(scenario)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.subtasks[0].task_manager = 1  # type: ignore[misc]


def test_the_job_builds_exactly_the_plan(stop_job: StopJob) -> None:
    job = Job(parse_scenario(DIAMOND.format(tms=2)))
    try:
        plan = job.plan
        assert [(t.name, t.task_manager) for t in job.all_tasks()] == [
            (s.name, s.task_manager) for s in plan.subtasks
        ]
        assert [p.name for p in job.env.partitions] == [p.name for p in plan.partitions]
        assert [g.name for g in job.env.gates] == [g.name for g in plan.gates]
        built = [
            [isinstance(c, RemoteInputChannel) for c in gate.channels]
            for task in job.all_tasks()
            for gate in task.gates
        ]
        assert built == [[c.remote for c in g.channels] for g in plan.gates]
        assert list(job.env.connections) == list(plan.connections)
    finally:
        stop_job(job)


def _on_task_manager_zero(plan: ExecutionPlan) -> ExecutionPlan:
    """The same plan with every subtask and partition on task manager 0: all channels local."""
    return dataclasses.replace(
        plan,
        subtasks=tuple(dataclasses.replace(s, task_manager=0) for s in plan.subtasks),
        partitions=tuple(dataclasses.replace(p, task_manager=0) for p in plan.partitions),
        gates=tuple(
            dataclasses.replace(
                g,
                task_manager=0,
                channels=tuple(dataclasses.replace(c, remote=False) for c in g.channels),
            )
            for g in plan.gates
        ),
        connections=(),
    )


def test_the_job_places_subtasks_where_a_given_plan_says(stop_job: StopJob) -> None:
    scenario = parse_scenario(DIAMOND.format(tms=2))
    job = Job(scenario, plan=_on_task_manager_zero(plan_deployment(scenario)))
    try:
        assert {t.task_manager for t in job.all_tasks()} == {0}
        channels = [c for t in job.all_tasks() for g in t.gates for c in g.channels]
        assert channels and all(isinstance(c, LocalInputChannel) for c in channels)
        assert job.env.connections == {}
    finally:
        stop_job(job)


def test_a_plan_made_for_another_scenario_is_refused_before_anything_is_built() -> None:
    before = set(threading.enumerate())
    plan = plan_deployment(parse_scenario(DIAMOND.format(tms=3)))
    with pytest.raises(JobError, match="plan_deployment"):
        Job(parse_scenario(DIAMOND.format(tms=2)), plan=plan)
    assert set(threading.enumerate()) <= before


def test_a_plan_that_contradicts_itself_is_refused() -> None:
    plan = plan_deployment(parse_scenario(DIAMOND.format(tms=2)))
    with pytest.raises(ConfigError, match="task manager 2, but the plan has 2"):
        dataclasses.replace(plan, subtasks=(dataclasses.replace(plan.subtasks[0], task_manager=2),))
    gate = plan.gates[0]  # source -> map (1/3) on 0 reads source (1/2) on 0: a local channel
    wrong = dataclasses.replace(
        gate, channels=(dataclasses.replace(gate.channels[0], remote=True),)
    )
    with pytest.raises(ConfigError, match="called remote but its producer is on the same"):
        dataclasses.replace(plan, gates=(wrong, *plan.gates[1:]))
    elsewhere = dataclasses.replace(plan.gates[1], connection_index=7)  # reads 0 -> 1 remotely
    with pytest.raises(ConfigError, match=r"needs connection \(0, 1, 7\), which the plan"):
        dataclasses.replace(plan, gates=(plan.gates[0], elsewhere, *plan.gates[2:]))
