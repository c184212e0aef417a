"""Scenario and topology files: defaults, the graph helpers, and one bad file per rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bpmon.model.errors import ConfigError, ScenarioError
from bpmon.scenario import (
    CheckpointConfig,
    InputSpec,
    MonitorConfig,
    NetworkConfig,
    OperatorSpec,
    Scenario,
    check_runtime_support,
    default_thread_pattern,
    load_expectation,
    load_scenario,
    load_topology,
    parse_scenario,
    parse_topology,
    thread_name,
    thread_pattern,
)
from bpmon.service.facade import format_doc
from tests.scenario.errors import error_of

SRC = 'name = "src"\nkind = "source"\nrate = 100'
WORK = 'name = "work"\nkind = "map"\ninputs = [{ from = "src" }]'
OUT = 'name = "out"\nkind = "sink"\ninputs = [{ from = "work" }]'
BATCH = 'name = "job"\nmode = "batch"'


def toml(*operators: str, head: str = 'name = "job"') -> str:
    """A scenario document: ``head`` then one ``[[operators]]`` table per body."""
    return head + "\n" + "".join(f"\n[[operators]]\n{body}\n" for body in operators)


def chain(src: str = "", work: str = "", out: str = "", head: str = 'name = "job"') -> str:
    """The chain src -> work -> out with extra lines added to each part."""
    return toml(f"{SRC}\n{src}", f"{WORK}\n{work}", f"{OUT}\n{out}", head=head)


# --- a good file -------------------------------------------------------------------------------

SPEC_EXAMPLE = """
name = "slow-enrich"
duration_s = 10
seed = 7

[network]
segment_size = 32768
buffers_per_channel = 2
floating_buffers_per_gate = 8
max_buffers_per_channel = 10
max_overdraft_buffers_per_gate = 5
flow_control = "credit"
buffer_timeout_ms = 100
task_managers = 2
link_bandwidth_mb_s = 0
total_buffers = 0

[checkpoints]
interval_ms = 0
mode = "aligned"

[monitor]
warmup_s = 2
samples = 100
interval_ms = 50

[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 20000
record_bytes = 100
cost_us = 0

[[operators]]
name = "enrich"
kind = "flatmap"
parallelism = 4
cost_us = 300
fanout = 3
slow_subtasks = { 1 = 4.0 }
inputs = [ { from = "source", partitioner = "hash", skew = 0.6 } ]

[[operators]]
name = "sink"
kind = "sink"
cost_us = 50
inputs = [ { from = "enrich", partitioner = "rebalance" } ]
"""


def test_the_example_of_the_spec_loads_with_every_value() -> None:
    scenario = parse_scenario(SPEC_EXAMPLE)
    assert (scenario.name, scenario.duration_s, scenario.seed, scenario.path) == (
        "slow-enrich",
        10.0,
        7,
        None,
    )
    assert scenario.network == NetworkConfig()
    enrich = scenario.operator("enrich")
    assert enrich.kind == "flatmap"
    assert (enrich.parallelism, enrich.cost_us, enrich.fanout) == (4, 300.0, 3.0)
    assert dict(enrich.slow_subtasks) == {1: 4.0}
    assert enrich.cost_of(1) == 1200.0
    assert enrich.cost_of(0) == 300.0
    assert enrich.inputs == (InputSpec("source", "hash", "pipelined", 0.6),)
    assert scenario.operator("sink").inputs == (InputSpec("enrich", "rebalance", "pipelined"),)
    assert scenario.operator("source").rate == 20000.0


def test_defaults_are_those_of_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "minimal.toml"
    path.write_text(chain())
    scenario = load_scenario(path)
    assert scenario.path == str(path)
    assert (scenario.duration_s, scenario.seed) == (10.0, 0)
    net = scenario.network
    assert (net.segment_size, net.buffers_per_channel, net.floating_buffers_per_gate) == (
        32768,
        2,
        8,
    )
    assert (net.max_buffers_per_channel, net.max_overdraft_buffers_per_gate) == (10, 5)
    assert (net.flow_control, net.buffer_timeout_ms, net.task_managers) == ("credit", 100, 2)
    assert (net.link_bandwidth_mb_s, net.total_buffers) == (0.0, 0)
    assert scenario.checkpoints == CheckpointConfig(interval_ms=0, mode="aligned")
    assert not scenario.checkpoints.enabled
    assert scenario.monitor == MonitorConfig(warmup_s=2.0, samples=100, interval_ms=50.0)
    work = scenario.operator("work")
    assert (work.parallelism, work.record_bytes, work.cost_us) == (1, 100, 0.0)
    assert (work.fanout, work.selectivity, dict(work.slow_subtasks)) == (1.0, 1.0, {})
    assert (work.rate, work.threads) == (None, None)
    assert work.inputs == (InputSpec("src", "forward", "pipelined", None),)


def test_the_default_partitioner_is_forward_only_between_equal_parallelisms() -> None:
    scenario = parse_scenario(chain(work="parallelism = 3", out="parallelism = 3"))
    assert scenario.operator("work").inputs[0].partitioner == "rebalance"
    assert scenario.operator("out").inputs[0].partitioner == "forward"


def test_a_filter_keeps_half_its_records_unless_told() -> None:
    text = chain(work="").replace('kind = "map"', 'kind = "filter"')
    assert parse_scenario(text).operator("work").selectivity == 0.5
    text = chain(work="selectivity = 0.9").replace('kind = "map"', 'kind = "filter"')
    assert parse_scenario(text).operator("work").selectivity == 0.9


def test_tables_and_numbers_written_as_integers_become_floats() -> None:
    head = 'name = "job"\nduration_s = 3\n[network]\nlink_bandwidth_mb_s = 10\nflow_control = "tcp"'
    head += '\n[checkpoints]\ninterval_ms = 500\nmode = "unaligned"\n[monitor]\nwarmup_s = 0'
    scenario = parse_scenario(chain(head=head))
    assert scenario.duration_s == 3.0
    assert isinstance(scenario.duration_s, float)
    assert scenario.network.link_bandwidth_mb_s == 10.0
    assert scenario.network.flow_control == "tcp"
    assert scenario.checkpoints == CheckpointConfig(500, "unaligned")
    assert scenario.checkpoints.enabled
    assert scenario.monitor.warmup_s == 0.0


def test_the_expect_table_is_ignored_by_the_loader() -> None:
    text = chain() + '\n[expect]\nroot_cause = "work"\nkind = "slow-operator"\nanything = 1\n'
    assert parse_scenario(text).name == "job"


# --- the graph helpers -------------------------------------------------------------------------

DIAMOND = toml(
    'name = "out"\nkind = "sink"\ninputs = [{ from = "left" }, { from = "right" }]',
    'name = "right"\nkind = "map"\ninputs = [{ from = "src" }]',
    SRC,
    'name = "left"\nkind = "filter"\ninputs = [{ from = "src" }]',
)


def names(operators: tuple[OperatorSpec, ...]) -> list[str]:
    return [op.name for op in operators]


def test_graph_helpers_follow_the_edges() -> None:
    scenario = parse_scenario(DIAMOND)
    assert names(scenario.topological_order()) == ["src", "right", "left", "out"]
    assert names(scenario.downstream("src")) == ["right", "left"]
    assert names(scenario.downstream("out")) == []
    assert names(scenario.upstream("out")) == ["left", "right"]
    assert names(scenario.sources()) == ["src"]
    assert names(scenario.sinks()) == ["out"]
    assert scenario.total_subtasks == 4
    with pytest.raises(KeyError):
        scenario.operator("nope")


def test_loaded_values_are_frozen_and_hashable() -> None:
    scenario = parse_scenario(SPEC_EXAMPLE)
    assert hash(scenario) == hash(parse_scenario(SPEC_EXAMPLE))
    with pytest.raises(AttributeError):
        scenario.name = "other"  # type: ignore[misc]


def test_a_hand_built_cyclic_scenario_has_no_topological_order() -> None:
    looped = OperatorSpec("work", "map", inputs=(InputSpec("work", "forward"),))
    with pytest.raises(ValueError, match="work -> work"):
        Scenario("x", operators=(looped,)).topological_order()


# --- files that cannot be read -----------------------------------------------------------------


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ScenarioError, match=re.escape(f"{path}: no such file")):
        load_scenario(path)


def test_a_directory_is_not_a_scenario(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="is a directory"):
        load_scenario(tmp_path)


def test_invalid_toml_names_the_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'name = "job"\nduration_s = = 3\n')
    assert "not valid TOML" in message
    assert "line 2" in message


def test_a_file_that_is_not_utf8_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(path)


def test_errors_are_config_errors_with_the_config_exit_code(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_scenario(tmp_path / "nope.toml")
    assert isinstance(info.value, ValueError)
    assert info.value.exit_code == 2


def test_parse_scenario_names_its_source() -> None:
    with pytest.raises(ScenarioError, match=r'^<string>: missing required key "name"'):
        parse_scenario(toml(SRC, head=""))
    with pytest.raises(ScenarioError, match=r"^inline\.toml: unknown key"):
        parse_scenario(chain(head='name = "j"\ncolour = 1'), "inline.toml")


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "text",
    [
        chain(head='name = "job"\ncolour = 1'),
        toml(SRC, head=""),
        chain(work="fanout = 2"),
        chain().replace("[[operators]]", "[network]\nsegment_size = 8\n\n[[operators]]", 1),
    ],
    ids=["unknown key", "missing key", "key of another kind", "network range"],
)
def test_a_format_error_ends_with_the_document_to_read(tmp_path: Path, text: str) -> None:
    assert error_of(tmp_path, text).endswith("; see docs/scenario.md (`bpmon docs scenario`)")
    assert (REPO / "docs" / "scenario.md").is_file()
    assert format_doc("scenario") == (REPO / "docs" / "scenario.md").read_text()


def test_a_topology_format_error_ends_with_the_topology_document(tmp_path: Path) -> None:
    path = tmp_path / "topo.toml"
    path.write_text(toml('name = "a"', 'name = "b"\nthread = "x"\ninputs = [{ from = "a" }]'))
    with pytest.raises(ScenarioError) as info:
        load_topology(path)
    assert str(info.value).endswith("; see docs/topology.md (`bpmon docs topology`)")
    assert (REPO / "docs" / "topology.md").is_file()


def test_an_unreadable_file_does_not_send_the_user_to_the_format(tmp_path: Path) -> None:
    assert "see docs" not in error_of(tmp_path, 'name = "job"\nduration_s = = 3\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "gone.toml")
    assert "see docs" not in str(info.value)


# --- one bad file per rule ---------------------------------------------------------------------

BAD_FILES = [
    # top level
    (
        "unknown top-level key",
        chain(head='name = "j"\nduration = 3'),
        'unknown key "duration" (did you mean "duration_s"?)',
    ),
    (
        "unknown key, nothing close",
        chain(head='name = "j"\nwibble = "red"'),
        'unknown key "wibble"; valid keys: name, duration_s',
    ),
    ("missing name", toml(SRC, head=""), 'missing required key "name"'),
    (
        "name not a string",
        chain(head="name = 5"),
        'key "name" = 5: expected a string, got an integer',
    ),
    ("empty name", chain(head='name = " "'), 'key "name" = " ": expected a non-empty job name'),
    (
        "duration zero",
        chain(head='name = "j"\nduration_s = 0'),
        'key "duration_s" = 0: expected a number > 0',
    ),
    (
        "duration bool",
        chain(head='name = "j"\nduration_s = true'),
        'key "duration_s" = true: expected a number, got a boolean',
    ),
    (
        "duration nan",
        chain(head='name = "j"\nduration_s = nan'),
        'key "duration_s" = nan: expected a finite number',
    ),
    (
        "seed float",
        chain(head='name = "j"\nseed = 1.5'),
        'key "seed" = 1.5: expected an integer, got a float',
    ),
    (
        "seed bool",
        chain(head='name = "j"\nseed = false'),
        'key "seed" = false: expected an integer, got a boolean',
    ),
    ("no operators", 'name = "j"\n', 'missing required key "operators"'),
    ("empty operators", 'name = "j"\noperators = []\n', 'key "operators" is empty'),
    (
        "operators not tables",
        'name = "j"\noperators = [1, 2]\n',
        'key "operators" = [...] (an array): expected an array of tables',
    ),
    # [network]
    (
        "network not a table",
        'name = "j"\nnetwork = 3\n' + toml(SRC, head=""),
        'key "network" = 3: expected a table, got an integer',
    ),
    (
        "network unknown key",
        chain(head='name = "j"\n[network]\nsegment_sise = 4096'),
        '[network]: unknown key "segment_sise" (did you mean "segment_size"?)',
    ),
    (
        "network bool",
        chain(head='name = "j"\n[network]\nbuffers_per_channel = true'),
        '[network]: key "buffers_per_channel" = true: expected an integer, got a boolean',
    ),
    (
        "network float for int",
        chain(head='name = "j"\n[network]\nsegment_size = 4096.0'),
        '[network]: key "segment_size" = 4096.0: expected an integer, got a float',
    ),
    (
        "flow control",
        chain(head='name = "j"\n[network]\nflow_control = "credits"'),
        'key "flow_control" = "credits": expected one of "credit" or "tcp" '
        '(did you mean "credit"?)',
    ),
    (
        "segment too small",
        chain(head='name = "j"\n[network]\nsegment_size = 100'),
        "slow.toml: network.segment_size = 100: a segment holds at least 256 bytes",
    ),
    (
        "task managers zero",
        chain(head='name = "j"\n[network]\ntask_managers = 0'),
        "network.task_managers = 0: must be at least 1",
    ),
    (
        "bandwidth negative",
        chain(head='name = "j"\n[network]\nlink_bandwidth_mb_s = -1.5'),
        "network.link_bandwidth_mb_s = -1.5: must be 0 or more",
    ),
    # [checkpoints]
    (
        "checkpoint mode",
        chain(head='name = "j"\n[checkpoints]\nmode = "exactly-once"'),
        '[checkpoints]: key "mode" = "exactly-once": expected one of "aligned" or "unaligned"',
    ),
    (
        "checkpoint interval",
        chain(head='name = "j"\n[checkpoints]\ninterval_ms = -1'),
        '[checkpoints]: key "interval_ms" = -1: expected an integer >= 0',
    ),
    (
        "checkpoint unknown key",
        chain(head='name = "j"\n[checkpoints]\ninterval = 5'),
        '[checkpoints]: unknown key "interval" (did you mean "interval_ms"?)',
    ),
    # [monitor]
    (
        "monitor samples",
        chain(head='name = "j"\n[monitor]\nsamples = 0'),
        '[monitor]: key "samples" = 0: expected an integer >= 1',
    ),
    (
        "monitor interval",
        chain(head='name = "j"\n[monitor]\ninterval_ms = 0'),
        '[monitor]: key "interval_ms" = 0: expected a number > 0',
    ),
    (
        "monitor warmup",
        chain(head='name = "j"\n[monitor]\nwarmup_s = -1'),
        '[monitor]: key "warmup_s" = -1: expected a number >= 0',
    ),
    (
        "monitor unknown key",
        chain(head='name = "j"\n[monitor]\nsample = 10'),
        '[monitor]: unknown key "sample" (did you mean "samples"?)',
    ),
    # operators
    (
        "operator without name",
        toml(SRC, 'kind = "map"\ninputs = [{ from = "src" }]'),
        'operators[1]: missing required key "name"',
    ),
    (
        "invalid name",
        toml(SRC, 'name = "en rich"\nkind = "sink"\ninputs = [{ from = "src" }]'),
        'operators[1]: key "name" = "en rich": expected a name made of letters, digits',
    ),
    (
        "duplicate name",
        toml(SRC, 'name = "src"\nkind = "sink"\ninputs = [{ from = "src" }]'),
        'operators[1] "src": duplicate operator name "src" (operators[0] has it too)',
    ),
    (
        "operator unknown key",
        chain(work="paralelism = 2"),
        'operators[1] "work": unknown key "paralelism" (did you mean "parallelism"?)',
    ),
    (
        "missing kind",
        toml(SRC, 'name = "work"\ninputs = [{ from = "src" }]'),
        'operators[1] "work": missing required key "kind" (one of "source", "map"',
    ),
    (
        "unknown kind",
        chain().replace('kind = "map"', 'kind = "mapper"'),
        'operators[1] "work": key "kind" = "mapper": expected one of "source", "map", "flatmap", '
        '"filter" or "sink" (did you mean "map"?)',
    ),
    (
        "kind not a string",
        chain().replace('kind = "map"', "kind = 3"),
        'key "kind" = 3: expected one of "source"',
    ),
    (
        "parallelism zero",
        chain(work="parallelism = 0"),
        'operators[1] "work": key "parallelism" = 0: expected an integer >= 1',
    ),
    (
        "parallelism bool",
        chain(work="parallelism = true"),
        'key "parallelism" = true: expected an integer, got a boolean',
    ),
    (
        "parallelism float",
        chain(work="parallelism = 2.0"),
        'key "parallelism" = 2.0: expected an integer, got a float',
    ),
    (
        "source without rate",
        toml('name = "src"\nkind = "source"', WORK),
        'operators[0] "src": missing required key "rate"',
    ),
    (
        "negative rate",
        chain().replace("rate = 100", "rate = -1"),
        'operators[0] "src": key "rate" = -1: expected a number >= 0',
    ),
    (
        "rate on a map",
        chain(work="rate = 5"),
        'operators[1] "work": key "rate" is only valid for kind "source" '
        '(this operator is a "map")',
    ),
    (
        "record bytes",
        chain(src="record_bytes = 0"),
        'operators[0] "src": key "record_bytes" = 0: expected an integer >= 1',
    ),
    (
        "negative cost",
        chain(work="cost_us = -5"),
        'operators[1] "work": key "cost_us" = -5: expected a number >= 0',
    ),
    (
        "fanout on a map",
        chain(work="fanout = 2"),
        'slow.toml: operators[1] "work": key "fanout" is only valid for kind "flatmap"',
    ),
    (
        "flatmap without fanout",
        chain().replace('kind = "map"', 'kind = "flatmap"'),
        'operators[1] "work": missing required key "fanout"',
    ),
    (
        "negative fanout",
        chain(work="fanout = -1").replace('kind = "map"', 'kind = "flatmap"'),
        'key "fanout" = -1: expected a number >= 0',
    ),
    (
        "selectivity out of range",
        chain(work="selectivity = 1.5").replace('kind = "map"', 'kind = "filter"'),
        'operators[1] "work": key "selectivity" = 1.5: expected a number from 0 to 1',
    ),
    (
        "selectivity on a map",
        chain(work="selectivity = 0.5"),
        'key "selectivity" is only valid for kind "filter"',
    ),
    (
        "slow subtask out of range",
        chain(work="parallelism = 2\nslow_subtasks = { 2 = 3.0 }"),
        'operators[1] "work": slow_subtasks: subtask index "2": '
        "expected a subtask index from 0 to 1",
    ),
    (
        "slow subtask not an index",
        chain(work="slow_subtasks = { a = 3.0 }"),
        'slow_subtasks: subtask index "a": expected a subtask index from 0 to 0',
    ),
    (
        "slow subtask negative index",
        chain(work='slow_subtasks = { "-1" = 3.0 }'),
        'slow_subtasks: subtask index "-1"',
    ),
    (
        "slow multiplier zero",
        chain(work="slow_subtasks = { 0 = 0.0 }"),
        'operators[1] "work": slow_subtasks: key "0" = 0.0: expected a number > 0',
    ),
    (
        "slow multiplier string",
        chain(work='slow_subtasks = { 0 = "x" }'),
        'slow_subtasks: key "0" = "x": expected a number, got a string',
    ),
    (
        "slow subtasks not a table",
        chain(work="slow_subtasks = 3"),
        'key "slow_subtasks" = 3: expected a table, got an integer',
    ),
    (
        "threads in a scenario",
        chain(work="threads = 'w-.*'"),
        'operators[1] "work": key "threads" is only valid in topology files',
    ),
    # inputs
    (
        "input unknown key",
        chain().replace('{ from = "src" }', '{ from = "src", partitoner = "hash" }'),
        'operators[1] "work": inputs[0]: unknown key "partitoner" (did you mean "partitioner"?)',
    ),
    (
        "input without from",
        chain().replace('{ from = "src" }', '{ partitioner = "hash" }'),
        'operators[1] "work": inputs[0]: missing required key "from"',
    ),
    (
        "unknown from",
        chain().replace('{ from = "src" }', '{ from = "sorce" }'),
        'inputs[0]: key "from" = "sorce": expected the name of an operator in this file '
        '(did you mean "src"?)',
    ),
    (
        "unknown partitioner",
        chain().replace('{ from = "src" }', '{ from = "src", partitioner = "shuffle" }'),
        'key "partitioner" = "shuffle": expected one of "forward", "rebalance", "hash" '
        'or "broadcast"',
    ),
    (
        "unknown exchange",
        chain().replace('{ from = "src" }', '{ from = "src", exchange = "streaming" }'),
        'key "exchange" = "streaming": expected one of "pipelined", "blocking", '
        '"hybrid-selective", "hybrid-full" or "hybrid"',
    ),
    (
        "forward between parallelisms",
        chain(work="parallelism = 2").replace(
            '{ from = "src" }', '{ from = "src", partitioner = "forward" }'
        ),
        'operators[1] "work": inputs[0]: key "partitioner" = "forward" needs equal '
        "parallelisms, but "
        '"src" has 1 and "work" has 2',
    ),
    (
        "skew out of range",
        chain().replace('{ from = "src" }', '{ from = "src", partitioner = "hash", skew = 1.5 }'),
        'inputs[0]: key "skew" = 1.5: expected a number from 0 to 1',
    ),
    (
        "skew without hash",
        chain(work="parallelism = 2").replace('{ from = "src" }', '{ from = "src", skew = 0.5 }'),
        'inputs[0]: key "skew" is only valid with partitioner "hash" (this input uses "rebalance")',
    ),
    (
        "inputs not tables",
        chain().replace('[{ from = "src" }]', '"src"'),
        'operators[1] "work": key "inputs" = "src": expected an array of tables',
    ),
    (
        "source with inputs",
        chain(src='inputs = [{ from = "work" }]'),
        'operators[0] "src": key "inputs" is not valid for kind "source"',
    ),
    (
        "map without inputs",
        toml(SRC, 'name = "work"\nkind = "map"'),
        'operators[1] "work": missing required key "inputs"',
    ),
    (
        "map with no input",
        chain().replace('[{ from = "src" }]', "[]"),
        'operators[1] "work": key "inputs" = [...] (an array): expected at least one input',
    ),
    (
        "reading from a sink",
        toml(
            SRC,
            OUT.replace('"work"', '"src"'),
            'name = "more"\nkind = "sink"\ninputs = [{ from = "out" }]',
        ),
        'operators[2] "more": inputs[0]: key "from" = "out": '
        "expected an operator that emits records",
    ),
    (
        "cycle",
        toml(
            SRC,
            'name = "a"\nkind = "map"\ninputs = [{ from = "src" }, { from = "b" }]',
            'name = "b"\nkind = "map"\ninputs = [{ from = "a" }]',
        ),
        'operators[1] "a": the inputs form a cycle: a -> b -> a',
    ),
    (
        "self loop",
        toml(SRC, 'name = "a"\nkind = "map"\ninputs = [{ from = "src" }, { from = "a" }]'),
        'operators[1] "a": the inputs form a cycle: a -> a',
    ),
    (
        "not connected to a source",
        toml(
            SRC,
            OUT.replace('"work"', '"src"'),
            'name = "x"\nkind = "map"\ninputs = [{ from = "y" }]',
            'name = "y"\nkind = "map"\ninputs = [{ from = "x" }]',
        ),
        'operators[2] "x": not connected to any source: no records reach x, y; '
        "their inputs only go "
        "round the cycle x -> y -> x",
    ),
    (
        "no source at all",
        toml('name = "x"\nkind = "map"\ninputs = [{ from = "x" }]'),
        'operators[0] "x": not connected to any source',
    ),
    # the runtime
    (
        "fail inside a chain",
        chain(work="fail = { after_records = 5 }", head='name = "job"\nchaining = true'),
        'operator "work" has "fail" inside the chain "src -> work -> out"',
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
def test_a_bad_file_gets_one_line_naming_key_and_value(
    tmp_path: Path, text: str, expected: str
) -> None:
    message = error_of(tmp_path, text)
    assert expected in message


def test_everything_the_format_allows_the_runtime_runs(tmp_path: Path) -> None:
    path = tmp_path / "chained.toml"
    path.write_text(
        chain(src="records = 10", head=BATCH + "\nchaining = true").replace(
            '{ from = "src" }', '{ from = "src", exchange = "hybrid-full" }'
        )
    )
    check_runtime_support(load_scenario(path, allow_unsupported=True))


def test_hybrid_alone_means_selective(tmp_path: Path) -> None:
    path = tmp_path / "hybrid.toml"
    path.write_text(
        chain(src="records = 10", head=BATCH).replace(
            '{ from = "src" }', '{ from = "src", exchange = "hybrid" }'
        )
    )
    assert load_scenario(path).operator("work").inputs[0].exchange == "hybrid-selective"


def test_the_spec_rules_are_checked_in_parse_scenario_too() -> None:
    with pytest.raises(ScenarioError, match=r'^mem: operators\[1\] "work": key "fanout"'):
        parse_scenario(chain(work="fanout = 2"), "mem")


# --- topology files ----------------------------------------------------------------------------

MONITOR_EXAMPLE = r"""
name = "etl"
[[operators]]
name = "ingest"
threads = '^ingest-\d+$'
[[operators]]
name = "transform"
threads = '^transform-\d+$'
inputs = [{ from = "ingest" }]
[[operators]]
name = "upload"
threads = '^upload-\d+$'
inputs = [{ from = "transform" }]
"""


def test_the_topology_example_of_the_spec_loads(tmp_path: Path) -> None:
    path = tmp_path / "etl.toml"
    path.write_text(MONITOR_EXAMPLE)
    topology = load_topology(path)
    assert topology.path == str(path)
    assert [(op.name, op.kind) for op in topology.operators] == [
        ("ingest", "source"),
        ("transform", "map"),
        ("upload", "sink"),
    ]
    assert topology.operator("ingest").threads == r"^ingest-\d+$"
    assert topology.operator("ingest").rate is None
    assert topology.operator("upload").inputs == (InputSpec("transform", "forward"),)


def test_topology_kinds_default_from_where_operators_sit() -> None:
    text = toml(
        'name = "lonely"',
        'name = "a"',
        'name = "b"\ninputs = [{ from = "a" }]',
        'name = "c"\nkind = "flatmap"\ninputs = [{ from = "a" }]',
        'name = "d"\ninputs = [{ from = "c" }]',
    )
    kinds = {op.name: op.kind for op in parse_topology(text).operators}
    assert kinds == {"lonely": "source", "a": "source", "b": "sink", "c": "flatmap", "d": "sink"}
    assert parse_topology(text).operator("c").fanout == 1.0


def test_topology_threads_default_to_the_runtime_naming() -> None:
    topology = parse_topology(toml('name = "a"', 'name = "b"\ninputs = [{ from = "a" }]'))
    op = topology.operator("b")
    assert op.threads is None
    assert re.match(thread_pattern(op), "b (2/3)")
    assert thread_pattern(parse_topology(MONITOR_EXAMPLE).operator("upload")) == r"^upload-\d+$"


def test_topology_allows_any_exchange() -> None:
    text = toml('name = "a"', 'name = "b"\ninputs = [{ from = "a", exchange = "blocking" }]')
    assert parse_topology(text).operator("b").inputs[0].exchange == "blocking"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "threads = '^ingest-(\\d+$'",
            'operators[1] "b": key "threads" = "^ingest-(\\\\d+$": expected a valid regular '
            "expression (missing ), unterminated subpattern at position 8)",
        ),
        ("threads = 5", 'operators[1] "b": key "threads" = 5: expected a string, got an integer'),
        ("threads = ''", 'key "threads" = "": expected a regular expression over thread names'),
        ("thread = 'x'", 'unknown key "thread" (did you mean "threads"?)'),
        ('inputs = [{ from = "b" }]', 'operators[1] "b": not connected to any source'),
        (
            'kind = "source"\ninputs = [{ from = "a" }]',
            'key "inputs" is not valid for kind "source"',
        ),
    ],
)
def test_a_bad_topology_gets_one_line(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "topo.toml"
    path.write_text(toml('name = "a"', f'name = "b"\n{body}'))
    with pytest.raises(ScenarioError) as info:
        load_topology(path)
    assert str(info.value).startswith(f"{path}: ")
    assert expected in str(info.value)


def test_a_topology_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such file"):
        load_topology(tmp_path / "gone.toml")


def test_thread_names_are_flinks() -> None:
    assert thread_name("enrich", 0, 4) == "enrich (1/4)"
    assert thread_name("enrich", 3, 4) == "enrich (4/4)"
    with pytest.raises(ValueError, match="out of range"):
        thread_name("enrich", 4, 4)


def test_the_default_thread_pattern_matches_only_that_vertex() -> None:
    pattern = re.compile(default_thread_pattern("a.b"))
    assert pattern.match("a.b (1/2)")
    assert pattern.match(thread_name("a.b", 11, 12))
    assert not pattern.match("axb (1/2)")
    assert not pattern.match("a.b (1/2) extra")
    assert not pattern.match("pre a.b (1/2)")


# --- [expect] ----------------------------------------------------------------------------------


def test_expectations_read_the_expect_table(tmp_path: Path) -> None:
    path = tmp_path / "e.toml"
    path.write_text(
        chain() + '\n[expect]\nroot_cause = "work"\nkind = "data-skew"\nsubtasks = [0]\n'
    )
    expectation = load_expectation(path)
    assert expectation is not None
    assert (expectation.root_cause, expectation.kind, expectation.subtasks) == (
        "work",
        "data-skew",
        (0,),
    )
    path.write_text(chain())
    assert load_expectation(path) is None


@pytest.mark.parametrize(
    ("expect", "expected"),
    [
        (
            'root_cause = "wrk"\nkind = "slow-operator"',
            '[expect]: key "root_cause" = "wrk": expected an operator of this file or "" '
            '(did you mean "work"?)',
        ),
        ('root_cause = "work"\nkind = "slow"', '[expect]: key "kind" = "slow": expected one of'),
        ('root_cause = "work"', '[expect]: missing required key "kind"'),
        ('root_cause = ""\nkind = "slow-sink"', 'key "kind" needs a root_cause'),
        (
            'root_cause = "work"\nkind = "slow-subtask"\nsubtasks = [true]',
            'key "subtasks" = [...] (an array): expected an array of subtask indices',
        ),
        ('kind = "slow-sink"', '[expect]: missing required key "root_cause"'),
        ('root_cause = ""\nroot = 1', '[expect]: unknown key "root"'),
    ],
)
def test_a_bad_expect_table_is_named(tmp_path: Path, expect: str, expected: str) -> None:
    path = tmp_path / "e.toml"
    path.write_text(f"{chain()}\n[expect]\n{expect}\n")
    with pytest.raises(ScenarioError) as info:
        load_expectation(path)
    assert str(info.value).startswith(f"{path}: ")
    assert expected in str(info.value)


def test_slow_subtasks_cannot_be_changed_after_loading() -> None:
    enrich = parse_scenario(SPEC_EXAMPLE).operator("enrich")
    with pytest.raises(TypeError):
        enrich.slow_subtasks[0] = 2.0  # type: ignore[index]
