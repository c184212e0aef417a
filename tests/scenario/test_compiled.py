"""Compiling a scenario as Flink's job graph generator does: regions, groups, slots, memory.

The rules under test are Flink's (``reference/flink-network.md`` §7): regions are the connected
components over pipelined edges; in batch mode a pipelined edge between two slot sharing groups
turns blocking and each region gets its own default group; a group needs as many slots as its
largest parallelism and groups add up; managed-memory fractions add up to 1 per group.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.model.errors import ScenarioError
from bpmon.scenario import Scenario, parse_scenario
from bpmon.scenario.compiled import compile_job


def job(*operators: str, head: str = 'name = "job"') -> str:
    """A scenario document: ``head`` then one ``[[operators]]`` table per body."""
    return head + "\n" + "".join(f"\n[[operators]]\n{body}\n" for body in operators)


def op(name: str, kind: str = "map", *, src: str = "", extra: str = "") -> str:
    """One operator table; ``src`` is its input (none for a source)."""
    lines = [f'name = "{name}"', f'kind = "{kind}"']
    if kind == "source":
        lines.append("rate = 100")
    if src:
        lines.append(f"inputs = [{{ {src} }}]")
    return "\n".join([*lines, extra])


BATCH = 'name = "job"\nmode = "batch"'


def load(text: str) -> Scenario:
    """``text`` loaded, also where the runtime cannot run it yet: only the graph matters here."""
    return parse_scenario(text, allow_unsupported=True)


def two_pipelines(extra_a: str = "", extra_b: str = "") -> str:
    """Two connected components: a1 -> a2 (parallelism 3) and b1 -> b2 (parallelism 2)."""
    return job(
        op("a1", "source", extra=f"parallelism = 3\n{extra_a}"),
        op("a2", "sink", src='from = "a1"', extra=f"parallelism = 3\n{extra_a}"),
        op("b1", "source", extra=f"parallelism = 2\n{extra_b}"),
        op("b2", "sink", src='from = "b1"', extra=f"parallelism = 2\n{extra_b}"),
    )


# --- slots ---------------------------------------------------------------------------------


def test_a_streaming_job_is_one_region_per_connected_component() -> None:
    plan = compile_job(load(two_pipelines()))
    assert [r.vertices for r in plan.regions] == [("a1", "a2"), ("b1", "b2")]
    assert [g.name for g in plan.groups] == ["default"]


def test_components_in_one_group_share_slots_so_the_job_needs_its_largest_parallelism() -> None:
    """Flink: "as many task slots as the highest parallelism used in the job" (one group)."""
    plan = compile_job(load(two_pipelines()))
    assert plan.slots_all_at_once == plan.min_slots == 3


def test_components_in_their_own_groups_need_the_sum_of_their_largest_parallelisms() -> None:
    """Groups add up: each component in its own group needs 3 + 2 slots."""
    text = two_pipelines('slot_sharing_group = "a"', 'slot_sharing_group = "b"')
    plan = compile_job(load(text))
    assert {g.name: g.slots for g in plan.groups} == {"a": 3, "b": 2}
    assert plan.slots_all_at_once == plan.min_slots == 5
    assert plan.slots_per_task_manager == 3  # enough for the job on 2 task managers


def test_slots_per_task_manager_as_given_and_whether_the_job_fits() -> None:
    text = two_pipelines('slot_sharing_group = "a"', 'slot_sharing_group = "b"')
    text = text.replace('name = "job"', 'name = "job"\n[cluster]\nslots_per_task_manager = 2', 1)
    plan = compile_job(load(text))
    assert plan.slots == 4 < plan.min_slots


# --- exchanges, regions, groups --------------------------------------------------------------


def chain_in_two_groups(head: str) -> str:
    return job(
        op("src", "source", extra='records = 100\nslot_sharing_group = "read"'),
        op("work", src='from = "src"', extra='slot_sharing_group = "heavy"'),
        op("out", "sink", src='from = "work"', extra='slot_sharing_group = "heavy"'),
        head=head,
    )


def test_a_pipelined_edge_between_two_slot_sharing_groups_becomes_blocking_in_batch() -> None:
    plan = compile_job(load(chain_in_two_groups(BATCH)))
    edge = plan.edge("work", 0)
    assert (edge.written, edge.exchange) == ("pipelined", "blocking")
    assert edge.reason == 'slot sharing groups differ ("read" -> "heavy")'
    assert plan.edge("out", 0).exchange == "pipelined"
    assert [r.vertices for r in plan.regions] == [("src",), ("work", "out")]
    assert plan.regions[1].blocking_inputs == (0,)


def test_in_streaming_an_edge_between_groups_stays_pipelined_and_the_groups_add_up() -> None:
    plan = compile_job(load(chain_in_two_groups('name = "job"')))
    assert plan.edge("work", 0).exchange == "pipelined"
    assert len(plan.regions) == 1
    assert plan.regions[0].slots == 2  # one slot of "read" and one of "heavy"


def test_batch_gives_each_region_its_own_default_group_and_runs_region_by_region() -> None:
    text = job(
        op("src", "source", extra="records = 10\nparallelism = 4"),
        op("work", src='from = "src", exchange = "blocking"', extra="parallelism = 2"),
        op("out", "sink", src='from = "work", exchange = "hybrid-full"', extra="parallelism = 3"),
        head=BATCH,
    )
    plan = compile_job(load(text))
    assert [o.group for o in plan.operators] == ["region-0", "region-1", "region-2"]
    assert [r.slots for r in plan.regions] == [4, 2, 3]
    assert plan.slots_all_at_once == 9
    assert plan.min_slots == 4
    assert plan.regions[2].hybrid_inputs == (1,)


# --- managed memory ------------------------------------------------------------------------


def memory_job(work: str, out: str, cluster: str = "") -> str:
    head = 'name = "job"\n' + (f"[cluster]\n{cluster}\n" if cluster else "")
    return job(
        op("src", "source"),
        op("work", src='from = "src"', extra=work),
        op("out", "sink", src='from = "work"', extra=out),
        head=head,
    )


def test_fractions_follow_the_weights_and_add_up_to_one_per_group() -> None:
    text = memory_job("managed_memory = 1", "managed_memory = 3", "managed_memory_mb = 200")
    plan = compile_job(load(text))
    assert plan.operator("src").fraction is None
    assert plan.operator("src").managed_memory_mb == 0
    assert plan.operator("work").fraction == pytest.approx(0.25)
    assert plan.operator("out").fraction == pytest.approx(0.75)
    # one slot per task manager: each slot has 200 MB
    assert plan.operator("out").managed_memory_mb == pytest.approx(150)


def test_fractions_follow_resource_specs_where_given() -> None:
    text = memory_job('managed_memory = "30mb"', 'managed_memory = "10mb"')
    plan = compile_job(load(text))
    assert plan.operator("work").fraction == pytest.approx(0.75)
    assert plan.operator("work").managed_memory_mb == pytest.approx(30)
    assert plan.operator("out").managed_memory_mb == pytest.approx(10)


@given(st.lists(st.integers(1, 50), min_size=1, max_size=4), st.integers(1, 3))
def test_fractions_add_up_to_one_in_every_group(weights: list[int], groups: int) -> None:
    ops = [op("src", "source", extra='slot_sharing_group = "g0"')]
    for i, w in enumerate(weights):
        extra = f'managed_memory = {w}\nslot_sharing_group = "g{i % groups}"'
        ops.append(op(f"m{i}", src='from = "src"', extra=extra))
    plan = compile_job(load(job(*ops, op("out", "sink", src='from = "m0"'))))
    for group in plan.groups:
        fractions = [o.fraction for o in plan.operators if o.group == group.name]
        used = [f for f in fractions if f is not None]
        assert not used or math.isclose(sum(used), 1.0)


@pytest.mark.parametrize(
    ("work", "out", "cluster", "expected"),
    [
        (
            "managed_memory = 1",
            'managed_memory = "10mb"',
            "",
            'slot sharing group "default" mixes managed_memory weights and sizes ("out" has a '
            "size): give all of its operators weights, or all sizes",
        ),
        (
            'managed_memory = "100mb"',
            'managed_memory = "60mb"',
            "managed_memory_mb = 256\nslots_per_task_manager = 2",
            'slot sharing group "default" asks for 160 MB of managed memory per slot, but a '
            "slot has 128 MB",
        ),
        (
            'managed_memory = "lots"',
            "",
            "",
            'key "managed_memory" = "lots": expected a weight > 0 (e.g. 1) or a size',
        ),
        ("managed_memory = 0", "", "", 'key "managed_memory" = 0: expected a weight > 0'),
    ],
    ids=["weights and sizes mixed", "sizes above a slot", "not a size", "weight 0"],
)
def test_managed_memory_that_cannot_be_shared_out_is_one_clear_line(
    work: str, out: str, cluster: str, expected: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(memory_job(work, out, cluster), "m.toml")
    assert str(info.value).startswith("m.toml: ")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


# --- modes, bounded sources and the other new keys ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            job(op("src", "source"), op("out", "sink", src='from = "src"'), head=BATCH),
            'operators[0] "src": mode = "batch" needs bounded sources',
        ),
        (
            job(op("src", "source"), op("out", "sink", src='from = "src", exchange = "blocking"')),
            'operators[1] "out": inputs[0]: key "exchange" = "blocking" needs mode = "batch"',
        ),
        (
            job(op("src", "source"), op("out", "sink", src='from = "src"', extra="records = 5")),
            'key "records" is only valid for kind "source"',
        ),
        (
            job(op("src", "source", extra="records = 0")),
            'key "records" = 0: expected an integer >= 1',
        ),
        (job(op("src", "source"), head='name = "j"\nmode = "bulk"'), 'key "mode" = "bulk"'),
        (job(op("src", "source"), head='name = "j"\nchaining = 1'), "expected true or false"),
        (
            job(op("src", "source"), head='name = "j"\n[cluster]\nslots = 2'),
            'unknown key "slots"',
        ),
        (
            job(op("src", "source"), head='name = "j"\n[cluster]\nslot_request_timeout_s = 0'),
            'key "slot_request_timeout_s" = 0: expected a number > 0',
        ),
        (
            job(op("src", "source"), head='name = "j"\n[network]\nhybrid_spill_threshold = 1.5'),
            "network.hybrid_spill_threshold = 1.5: a share of the pool",
        ),
    ],
    ids=[
        "batch unbounded",
        "blocking in streaming",
        "records on a map",
        "records 0",
        "mode",
        "chaining",
        "cluster key",
        "timeout",
        "hybrid ratio",
    ],
)
def test_a_bad_scheduling_key_is_one_clear_line(text: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.toml", allow_unsupported=True)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_hybrid_alone_means_selective_and_the_network_keeps_flinks_defaults() -> None:
    text = job(
        op("src", "source", extra="records = 10"),
        op("out", "sink", src='from = "src", exchange = "hybrid"'),
        head=BATCH,
    )
    scenario = parse_scenario(text, allow_unsupported=True)
    assert scenario.operator("out").inputs[0].exchange == "hybrid-selective"
    network = scenario.network
    assert (network.hybrid_spill_threshold, network.hybrid_spill_buffer_ratio) == (0.7, 0.4)
    assert network.hybrid_full_spill_trigger == 0.5
    assert (network.hybrid_full_release_threshold, network.hybrid_full_release_buffer_ratio) == (
        0.7,
        0.4,
    )
    assert scenario.cluster.slot_request_timeout_s == 300
    assert scenario.cluster.managed_memory_mb == 128


def test_chains_are_named_like_flinks_and_break_where_asked() -> None:
    text = job(
        op("src", "source"),
        op("parse", src='from = "src"'),
        op("check", "filter", src='from = "parse"'),
        op("enrich", src='from = "check"', extra="chain = false"),
        op("out", "sink", src='from = "enrich", partitioner = "rebalance"'),
        head='name = "job"\nchaining = true',
    )
    plan = compile_job(load(text))
    assert plan.tasks() == ("src -> parse -> check", "enrich", "out")
    assert plan.operator("parse").task == "src -> parse -> check"


def test_without_chaining_every_operator_is_its_own_task() -> None:
    plan = compile_job(load(two_pipelines()))
    assert plan.tasks() == ("a1", "a2", "b1", "b2")


# --- bpmon plan ----------------------------------------------------------------------------


def test_bpmon_plan_prints_regions_groups_slots_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "mem.toml"
    path.write_text(memory_job("managed_memory = 1", "managed_memory = 3"))
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # lines wrap between words at 80 columns
    assert "needs 1 to run all regions at once, at least 1 (fits)" in text
    assert "default: src, work, out — 1 slots, 128 MB managed memory per slot" in text
    assert "out x1 region 0, group default, 96 MB managed memory (fraction 0.75)" in text
    as_json = CliRunner().invoke(app, ["plan", str(path), "--json"])
    document = json.loads(as_json.output)
    assert document["min_slots"] == 1
    assert [o["fraction"] for o in document["operators"]] == [None, 0.25, 0.75]


def test_bpmon_plan_of_a_bad_file_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(memory_job("managed_memory = 1", 'managed_memory = "10mb"'))
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "mixes managed_memory weights and sizes" in result.output
