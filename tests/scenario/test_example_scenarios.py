"""The example scenarios: those bpmon ships (in the package) and the acceptance cases of the tests.

Every shape (``slow-sink``, ``hot-key``, ...) has two files with other figures: the shipped
example (``bpmon/scenarios/``) and an acceptance case (``tests/scenarios/``), so a diagnosis tuned
to one set of numbers cannot pass. Every file must load, carry an ``[expect]`` table, and have the
shape its name promises. A small back-of-the-envelope load model (written here, independent of the
runtime) checks that the numbers really make the expected operator the one bottleneck, with a
clear margin, so the runtime and the diagnosis have an unambiguous case to get right.
"""

from __future__ import annotations

import math
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import bpmon
from bpmon.model.errors import ScenarioError
from bpmon.runtime.keygroups import subtask_shares
from bpmon.scenario import (
    Expectation,
    InputSpec,
    Scenario,
    example_names,
    example_path,
    load_example,
    load_expectation,
    load_scenario,
)
from bpmon.scenario.compiled import compile_job
from bpmon.scenario.rates import mean_rate

SHAPES = [
    "checkpoint-timeouts",
    "fan-in",
    "flatmap-overdraft",
    "healthy",
    "hot-key",
    "slow-map-chain",
    "slow-sink",
    "slow-subtask",
    "source-limited",
    "tcp-head-of-line",
]
KIND_OF_SHAPE: dict[str, str | None] = {
    "checkpoint-timeouts": "slow-operator",
    "fan-in": "slow-operator",
    "flatmap-overdraft": "slow-sink",
    "healthy": None,
    "hot-key": "data-skew",
    "slow-map-chain": "slow-operator",
    "slow-sink": "slow-sink",
    "slow-subtask": "slow-subtask",
    "source-limited": "source-limited",
    "tcp-head-of-line": "slow-subtask",
}
SCHEDULING_SHAPES = ["batch-blocking", "hybrid-spill", "slot-starved"]
"""Shapes whose cause lies in scheduling or exchanges (docs/scenario.md, Scheduling): checked on
their compiled plan, not by the load model, which knows no slots or spilling."""
KIND_OF_SHAPE |= {
    "batch-blocking": "slow-operator",
    "hybrid-spill": "spilling",
    "slot-starved": "resource-starved",
}
ALL_SHAPES = sorted([*SHAPES, *SCHEDULING_SHAPES])
CASES = Path(__file__).parents[1] / "scenarios"
"""The acceptance cases: one more file per shape, beside the shipped examples."""
PACKAGE = Path(bpmon.__file__).parent

OWN = [pytest.param(example_path(name), id=f"own/{name}") for name in SHAPES]
CASE_FILES = [pytest.param(CASES / f"{name}.toml", id=f"case/{name}") for name in SHAPES]


def share(edge: InputSpec, index: int, parallelism: int, max_parallelism: int = 128) -> float:
    """The share of an edge's records that downstream subtask ``index`` receives (keys: the
    weight of the keys Flink's key groups send to it)."""
    if edge.partitioner == "broadcast":
        return 1.0
    if edge.partitioner == "hash" and edge.keys is not None:
        return subtask_shares(edge.keys, max_parallelism, parallelism)[index]
    if edge.partitioner == "hash" and edge.skew is not None:
        spread = (1.0 - edge.skew) / parallelism
        return edge.skew + spread if index == 0 else spread
    return 1.0 / parallelism


def utilisation(scenario: Scenario) -> dict[str, list[float]]:
    """Offered records/s over capacity for each subtask of each operator; a source's is its rate
    (a profile's mean over the run) over what its cost per emitted record allows (0 for a source
    that costs nothing).

    An operator passes on at most what its busiest subtask allows (it backpressures its
    inputs, a slow source falls behind), so operators downstream of a bottleneck see the
    reduced rate.
    """
    out_rate: dict[str, float] = {}
    result: dict[str, list[float]] = {}
    for op in scenario.topological_order():
        if op.kind == "source":
            assert op.rate is not None and op.rate > 0
            rates = [mean_rate(op, i, scenario.duration_s) for i in range(op.parallelism)]
            result[op.name] = [rate * op.cost_us / 1e6 for rate in rates]
            out_rate[op.name] = sum(
                r / max(1.0, u) for r, u in zip(rates, result[op.name], strict=True)
            )
            continue
        n = op.parallelism
        mp = op.max_parallelism
        load = [sum(out_rate[e.source] * share(e, i, n, mp) for e in op.inputs) for i in range(n)]
        capacity = [1e6 / op.cost_of(i) if op.cost_of(i) else math.inf for i in range(n)]
        used = [offered / cap for offered, cap in zip(load, capacity, strict=True)]
        result[op.name] = used
        out_rate[op.name] = sum(load) / max(1.0, *used) * op.fanout * op.selectivity
    return result


def expectation_of(path: Path) -> Expectation:
    expectation = load_expectation(path)
    assert expectation is not None, f"{path} has no [expect] table"
    return expectation


@pytest.mark.parametrize("path", OWN + CASE_FILES)
def test_the_numbers_make_the_expected_operator_the_one_bottleneck(path: Path) -> None:
    scenario = load_scenario(path)
    expectation = expectation_of(path)
    used = {name: max(subtasks) for name, subtasks in utilisation(scenario).items()}
    if not expectation.root_cause:
        assert max(used.values()) <= 0.25, used
        return
    assert used[expectation.root_cause] >= 1.25, used
    others = {name: u for name, u in used.items() if name != expectation.root_cause}
    assert max(others.values()) <= 0.8, used


@pytest.mark.parametrize("path", OWN + CASE_FILES)
def test_each_example_has_the_shape_its_name_promises(path: Path) -> None:
    scenario = load_scenario(path)
    expectation = expectation_of(path)
    shape = path.stem
    root = scenario.operator(expectation.root_cause) if expectation.root_cause else None
    assert expectation.kind == KIND_OF_SHAPE[shape]
    if expectation.kind == "slow-sink":
        assert root is not None and root.kind == "sink"
    if shape in ("slow-map-chain", "fan-in"):
        assert root is not None and root.kind != "sink"
    if shape == "slow-map-chain":
        assert len(scenario.operators) >= 4
        assert all(len(scenario.downstream(op.name)) <= 1 for op in scenario.operators)
    if shape == "fan-in":
        assert root is not None and len({e.source for e in root.inputs}) >= 2
        assert all(scenario.operator(e.source).kind == "source" for e in root.inputs)
    if shape == "flatmap-overdraft":
        flatmaps = [op for op in scenario.operators if op.kind == "flatmap"]
        assert any(op.fanout * op.record_bytes > scenario.network.segment_size for op in flatmaps)
        assert scenario.checkpoints.enabled
    if shape == "checkpoint-timeouts":  # aligned barriers behind a slow operator after a hash
        assert scenario.checkpoints.enabled and scenario.checkpoints.mode == "aligned"
        assert root is not None and any(e.partitioner == "hash" for e in root.inputs)
        assert scenario.checkpoints.timeout_ms < scenario.monitor.warmup_s * 1000
        assert "checkpoint-backpressure" in expectation.findings
    if shape == "source-limited":  # nothing downstream is the cause: the source cannot keep up
        assert root is not None and root.kind == "source" and not scenario.chaining
    if shape == "tcp-head-of-line":  # head-of-line blocking among the channels of one exchange
        assert scenario.network.flow_control == "tcp"
        assert scenario.network.task_managers >= 2
        assert root is not None and root.parallelism > scenario.network.task_managers
        assert all(e.partitioner == "forward" for op in scenario.operators for e in op.inputs)


@pytest.mark.parametrize("path", OWN + CASE_FILES)
def test_skewed_and_slow_subtasks_are_the_expected_ones(path: Path) -> None:
    scenario = load_scenario(path)
    expectation = expectation_of(path)
    if expectation.kind not in ("data-skew", "slow-subtask"):
        assert expectation.subtasks == ()
        return
    root = scenario.operator(expectation.root_cause)
    used = utilisation(scenario)[root.name]
    assert expectation.subtasks == (used.index(max(used)),)
    if expectation.kind == "data-skew":
        assert any(e.partitioner == "hash" and (e.skew or e.keys) for e in root.inputs)
        assert not root.slow_subtasks
    else:
        assert tuple(root.slow_subtasks) == expectation.subtasks
        # records spread evenly: rebalanced, or forward from sources of one rate
        assert all(e.partitioner in ("rebalance", "forward") for e in root.inputs)


@pytest.mark.parametrize(
    "path",
    [
        *(pytest.param(example_path(n), id=f"own/{n}") for n in SCHEDULING_SHAPES),
        *(pytest.param(CASES / f"{n}.toml", id=f"case/{n}") for n in SCHEDULING_SHAPES),
    ],
)
def test_each_scheduling_example_has_the_shape_its_name_promises(path: Path) -> None:
    scenario = load_scenario(path)
    expectation = expectation_of(path)
    plan = compile_job(scenario)
    root = scenario.operator(expectation.root_cause)
    assert expectation.kind == KIND_OF_SHAPE[path.stem]
    exchanges = {e.exchange for e in plan.edges}
    if path.stem == "slot-starved":  # a streaming job with fewer slots than its groups need
        assert scenario.mode == "streaming" and plan.slots < plan.min_slots
        assert len(plan.groups) >= 2 and root.kind == "source"
        assert root.parallelism == max(op.parallelism for op in scenario.operators)
    if path.stem == "batch-blocking":  # region by region; the root is the slow one of region 0
        assert scenario.mode == "batch" and "blocking" in exchanges
        assert plan.min_slots <= plan.slots < plan.slots_all_at_once
        assert plan.operator(root.name).region == 0
        assert max(utilisation(scenario)[root.name]) >= 1.25
    if path.stem == "hybrid-spill":  # the consumer of a hybrid exchange is slower than its source
        edge = next(e for e in plan.edges if e.source == root.name)
        assert edge.exchange == "hybrid-selective" and root.kind == "source"
        assert max(utilisation(scenario)[edge.target]) >= 1.25
        assert plan.slots >= plan.slots_all_at_once  # both ends run: it spills, it does not wait


def test_bpmon_ships_one_example_of_each_shape_and_a_demo() -> None:
    assert example_names() == sorted([*ALL_SHAPES, "demo"])


@pytest.mark.parametrize("name", [*ALL_SHAPES, "demo"])
def test_own_examples_are_documented_and_light_enough_for_two_cores(name: str) -> None:
    path = example_path(name)
    assert path.parent == PACKAGE / "scenarios"
    assert path.read_text().startswith("# "), (
        "each example starts with a comment saying what it shows"
    )
    scenario = load_scenario(path)
    assert scenario.total_subtasks <= 10
    assert sum((op.rate or 0) * op.parallelism for op in scenario.sources()) <= 10_000
    assert all(op.rate for op in scenario.sources()), "rate 0 (as fast as possible) burns a core"
    assert scenario.duration_s <= 12


def test_there_is_one_acceptance_case_per_shape() -> None:
    assert sorted(path.stem for path in CASES.glob("*.toml")) == ALL_SHAPES


def test_shipped_examples_and_acceptance_cases_are_variants_not_copies() -> None:
    for name in ALL_SHAPES:
        shipped, case = load_example(name), load_scenario(CASES / f"{name}.toml")
        assert shipped.name != case.name
        assert [op.cost_us for op in shipped.operators] != [op.cost_us for op in case.operators]


def test_the_demo_is_a_short_chain_with_a_slow_enrich() -> None:
    demo = load_example("demo")
    assert demo.duration_s == 8
    assert [op.name for op in demo.topological_order()] == ["source", "parse", "enrich", "sink"]
    assert [op.kind for op in demo.topological_order()] == ["source", "map", "map", "sink"]
    assert expectation_of(example_path("demo")) == Expectation("enrich", "slow-operator")
    assert demo.monitor.warmup_s < demo.duration_s


def test_examples_are_found_by_name_with_or_without_suffix() -> None:
    assert example_path("demo.toml") == example_path("demo")
    with pytest.raises(
        ScenarioError,
        match=r'no example scenario named "hotkey" \(did you mean "hot-key"\?\); '
        r"known: batch-blocking, checkpoint-timeouts, demo, fan-in,",
    ):
        example_path("hotkey")


def test_examples_load_from_a_zipped_package_with_only_the_standard_library(tmp_path: Path) -> None:
    """The loader finds its examples through importlib.resources, not through a checkout path,
    and reads one from a real file extracted from the zip (model.datafiles.real_file, which the
    shipped rules and profiles are extracted by too)."""
    archive = tmp_path / "bpmon.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(PACKAGE / "__init__.py", "bpmon/__init__.py")
        model = [*PACKAGE.glob("model/*.py")]
        for path in [*model, *PACKAGE.glob("scenario/*.py"), *PACKAGE.glob("scenarios/*.toml")]:
            zf.write(path, f"bpmon/{path.relative_to(PACKAGE)}")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import bpmon.scenario as s; "
        "assert s.__file__.startswith(sys.argv[1]), s.__file__; "
        "p = s.example_path('demo'); "
        "print(s.load_scenario(p).name, p.is_file(), len(s.example_names()))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(archive)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["demo", "True", str(len(ALL_SHAPES) + 1)]
