"""Branching chains, against Flink's rules for chaining and naming.

Flink's ``StreamingJobGraphGenerator`` chains an edge when the consumer has that one input, both
ends share a slot sharing group and a parallelism, the edge is forward and not a batch exchange,
and the consumer does not start a new chain; the producer may be chained to several consumers.
It names a chain recursively: ``"a -> b"`` for one chained consumer, ``"a -> (b, c)"`` for
several, each consumer's own chain name inside, in the order of the producer's outputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.model.errors import ScenarioError
from bpmon.scenario import Scenario, load_expectation, load_scenario, parse_scenario
from bpmon.scenario.chained import chain_writers, chained_scenario
from bpmon.scenario.chaining import operator_names
from bpmon.scenario.compiled import compile_job
from bpmon.service.whatif import changed, parse_change


def job(*operators: str, mode: str = "streaming") -> str:
    """A chaining scenario: an ``[[operators]]`` table per body, each at parallelism 2."""
    head = f'name = "job"\nchaining = true\nmode = "{mode}"\n'
    return head + "".join(f"\n[[operators]]\nparallelism = 2\n{body}\n" for body in operators)


def op(name: str, kind: str = "map", *inputs: str, extra: str = "") -> str:
    """One operator table; each of ``inputs`` is an input table's body."""
    lines = [f'name = "{name}"', f'kind = "{kind}"', extra]
    if kind == "source":
        lines.append("rate = 100")
    if inputs:
        lines.append("inputs = [" + ", ".join(f"{{ {i} }}" for i in inputs) + "]")
    return "\n".join(lines)


def load(text: str) -> Scenario:
    return parse_scenario(text, allow_unsupported=True)


def tasks(text: str) -> tuple[str, ...]:
    return compile_job(load(text)).tasks()


def test_an_operator_is_chained_to_each_of_its_forward_consumers() -> None:
    text = job(
        op("src", "source"),
        op("parse", "map", 'from = "src"'),
        op("enrich", "map", 'from = "parse"'),
        op("audit", "filter", 'from = "parse"'),
        op("store", "sink", 'from = "enrich", partitioner = "rebalance"'),
        op("log", "sink", 'from = "audit", partitioner = "rebalance"'),
    )
    assert tasks(text) == ("src -> parse -> (enrich, audit)", "store", "log")


def test_a_nested_branch_is_named_recursively_in_the_order_of_the_outputs() -> None:
    text = job(
        op("src", "source"),
        op("b", "map", 'from = "src"'),
        op("c", "map", 'from = "src"'),
        op("d", "sink", 'from = "b"'),
        op("e", "sink", 'from = "c"'),
        op("f", "sink", 'from = "c"'),
    )
    # c's own chain is "c -> (e, f)"; b's is "b -> d"; src lists b before c (file order)
    assert tasks(text) == ("src -> (b -> d, c -> (e, f))",)


@pytest.mark.parametrize(
    ("breaking", "expected"),
    [
        # a keyed exchange is not forward
        (op("audit", "sink", 'from = "parse", partitioner = "hash"'), "audit"),
        # chain = false: Flink's startNewChain()/disableChaining()
        (op("audit", "sink", 'from = "parse"', extra="chain = false"), "audit"),
        # another slot sharing group
        (op("audit", "sink", 'from = "parse"', extra='slot_sharing_group = "side"'), "audit"),
        # two inputs: Flink chains a consumer only through its one input
        (op("audit", "sink", 'from = "parse"', 'from = "src", partitioner = "rebalance"'), "audit"),
    ],
)
def test_a_consumer_that_breaks_a_rule_starts_its_own_task_and_the_rest_still_chain(
    breaking: str, expected: str
) -> None:
    text = job(
        op("src", "source"),
        op("parse", "map", 'from = "src"'),
        op("enrich", "sink", 'from = "parse"'),
        breaking,
    )
    assert tasks(text) == ("src -> parse -> enrich", expected)


def test_batch_mode_breaks_a_chain_at_a_blocking_exchange() -> None:
    text = job(
        op("src", "source", extra='slot_sharing_group = "a"\nrecords = 100'),
        op("left", "sink", 'from = "src"', extra='slot_sharing_group = "a"'),
        op("right", "sink", 'from = "src"', extra='slot_sharing_group = "b"'),
        op(
            "written",
            "sink",
            'from = "src", exchange = "blocking"',
            extra='slot_sharing_group = "a"',
        ),
        mode="batch",
    )
    plan = compile_job(load(text))
    assert plan.tasks() == ("src -> left", "right", "written")
    assert plan.edge("right", 0).exchange == "blocking"  # across groups, as Flink's batch mode


def test_each_output_of_a_branching_chain_is_written_by_the_member_it_leaves() -> None:
    text = job(
        op("src", "source"),
        op("parse", "map", 'from = "src"'),
        op("enrich", "map", 'from = "parse"', extra="record_bytes = 700"),
        op("audit", "filter", 'from = "parse"', extra="record_bytes = 40"),
        op("keyed", "sink", 'from = "parse", partitioner = "hash"'),
        op("store", "sink", 'from = "enrich", partitioner = "rebalance"'),
        op("log", "sink", 'from = "audit", partitioner = "rebalance"'),
    )
    scenario = load(text)
    chain = "src -> parse -> (enrich, audit)"
    assert chain_writers(scenario) == {
        ("keyed", 0): "parse",  # a member with chained consumers may also write a partition
        ("store", 0): "enrich",
        ("log", 0): "audit",
    }
    tasks = chained_scenario(scenario)
    head = tasks.operator(chain)
    assert [m.name for m in head.members] == ["src", "parse", "enrich", "audit"]
    assert head.kind == "source"
    assert [e.source for op in tasks.operators[1:] for e in op.inputs] == [chain] * 3


def test_a_chain_is_a_sink_only_when_every_branch_ends_in_a_sink() -> None:
    def branches(a_kind: str, *more: str) -> Scenario:
        return load(
            job(
                op("src", "source"),
                op("parse", "map", 'from = "src", partitioner = "rebalance"'),
                op("a", a_kind, 'from = "parse"'),
                op("b", "sink", 'from = "parse"'),
                *more,
            )
        )

    chain = "parse -> (a, b)"
    assert chained_scenario(branches("sink")).operator(chain).kind == "sink"
    writes = branches("map", op("c", "sink", 'from = "a", partitioner = "rebalance"'))
    assert chained_scenario(writes).operator(chain).kind == "map"
    keyed = branches("sink", op("x", "sink", 'from = "parse", partitioner = "hash"'))
    assert chained_scenario(keyed).operator(chain).kind == "map"  # parse's output leaves it


def test_operator_names_reads_flinks_names_back() -> None:
    assert operator_names("src -> (b -> d, c -> (e, f))") == ("src", "b", "d", "c", "e", "f")
    assert operator_names("my-op.v2 -> x_1") == ("my-op.v2", "x_1")
    assert operator_names("alone") == ("alone",)


def test_whatif_gives_a_branching_chain_one_parallelism(tmp_path: Path) -> None:
    text = job(
        op("src", "source"),
        op("parse", "map", 'from = "src", partitioner = "rebalance"'),
        op("enrich", "sink", 'from = "parse"'),
        op("audit", "sink", 'from = "parse"'),
    )
    path = tmp_path / "branch.toml"
    path.write_text(text)
    scenario = load_scenario(path)
    again = changed(scenario, [parse_change("parse -> (enrich, audit).parallelism=4")])
    assert {o.name: o.parallelism for o in again.operators} == {
        "src": 2,
        "parse": 4,
        "enrich": 4,
        "audit": 4,
    }
    assert compile_job(again).tasks() == ("src", "parse -> (enrich, audit)")


def test_bpmon_plan_shows_a_branching_chain(tmp_path: Path) -> None:
    path = tmp_path / "branch.toml"
    path.write_text(
        job(
            op("src", "source"),
            op("enrich", "sink", 'from = "src"'),
            op("audit", "sink", 'from = "src"'),
        )
    )
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 0, result.output
    assert "task 'src -> (enrich, audit)'" in result.output


def test_an_expectation_names_a_chain_as_bpmon_plan_does(tmp_path: Path) -> None:
    text = job(
        op("src", "source"),
        op("enrich", "sink", 'from = "src"'),
        op("audit", "sink", 'from = "src"'),
    )
    path = tmp_path / "branch.toml"
    path.write_text(
        text + '\n[expect]\nroot_cause = "src -> (enrich, audit)"\nkind = "source-limited"\n'
    )
    expectation = load_expectation(path)
    assert expectation is not None and expectation.root_cause == "src -> (enrich, audit)"
    path.write_text(text + '\n[expect]\nroot_cause = "src -> enrich"\nkind = "source-limited"\n')
    with pytest.raises(ScenarioError, match=r"expected an operator or a chain .* of this file"):
        load_expectation(path)
