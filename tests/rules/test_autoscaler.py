"""The autoscaler's decision, against figures worked out by hand from its published formulas
(``docs/autoscaler.md``), and the verdicts beside bpmon's causes.

With the defaults: target capacity = round(catch-up + target x 300 / 1800 + target / 0.7); a
vertex is outside its bounds below round(target / 1.0) (+ catch-up) or above round(catch-up +
target / 6 + target / 0.4); new parallelism = ceil(capacity / TPR x P), the factor at least 0.4.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.model.errors import ConfigError
from bpmon.model.signals import SourceBacklog
from bpmon.model.values import (
    Edge,
    Metrics,
    Observation,
    RootCause,
    SubtaskWindow,
    VertexObservation,
)
from bpmon.rules.autoscaler import AutoscalerConfig, decide, verdicts
from bpmon.rules.autoscaler_config import load_autoscaler_config

from .observations import WINDOW


def task(
    index: int,
    busy: float,
    rin: float,
    rout: float | None = None,
    lag: float | None = None,
    growth: float | None = None,
    held: float = 0.0,
) -> SubtaskWindow:
    backlog = None if lag is None else SourceBacklog(pending_records=lag, growth_per_s=growth)
    metrics = Metrics(
        busy_ratio=busy,
        backpressured_time_ratio=held,
        records_in_per_s=rin,
        records_out_per_s=rin if rout is None else rout,
        backlog=backlog,
    )
    return SubtaskWindow(index=index, thread=f"t{index}", samples=100, metrics=metrics)


def source(*subs: SubtaskWindow) -> VertexObservation:
    return VertexObservation("source", len(subs), (), subs, kind="source")


def op(
    name: str, *subs: SubtaskWindow, inputs: str = "source", keyed: bool = False
) -> VertexObservation:
    edge = Edge(inputs, "hash" if keyed else "rebalance")
    groups = 128 if keyed else None
    return VertexObservation(name, len(subs), (edge,), subs, kind="map", max_parallelism=groups)


def observation(*vertices: VertexObservation) -> Observation:
    return Observation(job="job", source="runtime", window=WINDOW, vertices=vertices)


def row(obs: Observation, name: str, config: AutoscalerConfig | None = None) -> tuple[int, int]:
    found = next(v for v in decide(obs, config).vertices if v.name == name)
    return found.parallelism, found.recommended_parallelism


def test_a_plain_slow_operator_without_lag_is_within_its_bounds_and_left_alone() -> None:
    # map: TPR = 1,000 / 1.0 = target 1,000: not below round(1,000 / 1.0): nothing triggers; the
    # source (TPR 20,000, above round(333 + 5,000)) would shrink 2 -> 1 after its interval
    obs = observation(
        source(task(0, 0.1, 1000), task(1, 0.1, 1000)),
        op("map", task(0, 1.0, 500), task(1, 1.0, 500)),
    )
    decision = decide(obs)
    assert decision.acts  # the scale-down of the source, in an hour, and the map's with it
    rows = {v.name: v for v in decision.vertices}
    assert (rows["source"].recommended_parallelism, rows["source"].delayed) == (1, True)
    # map: capacity round(1,000 / 6 + 1,000 / 0.7) = 1,595, factor 1.595: ceil(3.19) = 4, within
    # its bounds, so only when the source's scale-down is applied
    assert (rows["map"].recommended_parallelism, rows["map"].delayed) == (4, True)


def test_a_slow_operator_behind_a_growing_lag_is_scaled_for_target_and_catch_up() -> None:
    # source reads 1,000, its lag of 900,000 grows 1,000/s: target 2,000, catch-up 500, backlog
    # (900 s of input > 300 s); map TPR 1,000: capacity round(500 + 333.33 + 2,857.14) = 3,690,
    # factor 3.69: ceil(7.38) = 8
    obs = observation(
        source(
            task(0, 0.1, 500, lag=450_000, growth=500, held=0.9),
            task(1, 0.1, 500, lag=450_000, growth=500, held=0.9),
        ),
        op("map", task(0, 1.0, 500), task(1, 1.0, 500)),
    )
    decision = decide(obs)
    mapped = next(v for v in decision.vertices if v.name == "map")
    assert decision.acts and mapped.outside
    assert (mapped.target_rate, mapped.catch_up_rate) == (2000.0, 500.0)
    assert mapped.true_processing_rate == 1000.0
    assert mapped.recommended_parallelism == 8


def test_a_source_with_a_large_backlog_sizes_its_consumer_for_the_catch_up() -> None:
    # arrival 1,200 (reads 1,000, lag grows 200/s), lag 1,800,000: catch-up 1,000; map TPR
    # 1,000: capacity round(1,000 + 200 + 1,714.29) = 2,914: ceil(5.828) = 6
    obs = observation(
        source(
            task(0, 0.2, 500, lag=900_000, growth=100, held=0.8),
            task(1, 0.2, 500, lag=900_000, growth=100, held=0.8),
        ),
        op("map", task(0, 1.0, 500), task(1, 1.0, 500)),
    )
    assert row(obs, "map") == (2, 6)


def test_max_aggregation_sizes_a_hot_key_from_its_hot_subtask_and_aligns_to_key_groups() -> None:
    # 2,000 in, busiest subtask 100% (MAX): TPR 2,000. Lag 360,000 growing 400/s: target 2,400,
    # catch-up 200 (180 s of input: no backlog); capacity round(200 + 400 + 3,428.57) = 4,029;
    # factor 2.0145: ceil(8.058) = 9; 128 key groups: 9 gives 14 each as 9 does, 10 gives 12
    obs = observation(
        source(
            task(0, 0.3, 1000, lag=180_000, growth=200, held=0.7),
            task(1, 0.3, 1000, lag=180_000, growth=200, held=0.7),
        ),
        op(
            "aggregate",
            task(0, 1.0, 1550),
            task(1, 0.15, 150),
            task(2, 0.15, 150),
            task(3, 0.15, 150),
            keyed=True,
        ),
    )
    assert row(obs, "aggregate") == (4, 10)
    # AVG hides the hot subtask: busy 0.3625, TPR 5,517: factor 0.73, ceil(2.92) = 3, a
    # scale-down aligned within [3, 4]: 3 neither divides 128 nor gives fewer groups, 4 does: 4
    averaged = AutoscalerConfig(busy_time_aggregator="AVG")
    assert row(obs, "aggregate", averaged) == (4, 4)
    hot = RootCause("aggregate", "data-skew", (0,), 1.0, recommended_parallelism=None)
    [verdict] = verdicts(decide(obs), (hot,), obs)
    assert verdict.verdict == "scales-ineffectively"
    assert "hot key stays on one subtask" in verdict.detail and "4 -> 10" in verdict.detail


def test_a_scale_down_is_bounded_by_the_factor_cap_and_waits_its_interval() -> None:
    # map 10 subtasks 10% busy for 1,000 in: TPR 10,000 above round(166.67 + 2,500) = 2,667:
    # outside; factor 1,595 / 10,000 = 0.16, capped at 0.4: ceil(4) = 4
    obs = observation(
        source(task(0, 0.1, 1000)),
        op("map", *(task(i, 0.1, 100) for i in range(10))),
    )
    decision = decide(obs)
    mapped = next(v for v in decision.vertices if v.name == "map")
    assert (mapped.parallelism, mapped.recommended_parallelism) == (10, 4)
    assert mapped.delayed and decision.acts
    bottleneck = RootCause("map", "slow-operator", (), 1.0)
    [verdict] = verdicts(decision, (bottleneck,), obs)
    assert verdict.verdict == "scales-down-bottleneck"


def test_a_scale_up_within_one_of_bpmon_agrees_and_far_above_it_over_provisions() -> None:
    obs = observation(
        source(
            task(0, 0.1, 500, lag=450_000, growth=500, held=0.9),
            task(1, 0.1, 500, lag=450_000, growth=500, held=0.9),
        ),
        op("map", task(0, 1.0, 500), task(1, 1.0, 500)),
    )
    decision = decide(obs)  # map 2 -> 8
    close = RootCause("map", "slow-operator", (0, 1), 1.0, recommended_parallelism=7)
    assert verdicts(decision, (close,), obs)[0].verdict == "agrees"
    lean = RootCause("map", "slow-operator", (0, 1), 1.0, recommended_parallelism=4)
    assert verdicts(decision, (lean,), obs)[0].verdict == "over-provisions"
    # a sink bpmon sized scales with its subtasks as far as bpmon can tell: the verdict is the
    # sizing's, with the caveat; one it could not size (its system is the limit) is not scaled
    sink = RootCause("map", "slow-sink", (0, 1), 1.0, recommended_parallelism=8)
    [sized] = verdicts(decision, (sink,), obs)
    assert sized.verdict == "agrees" and "if the system the sink writes to scales" in sized.detail
    capped = RootCause("map", "slow-sink", (0, 1), 1.0, recommended_parallelism=None)
    [unsized] = verdicts(decision, (capped,), obs)
    assert unsized.verdict == "scales-ineffectively" and "external system" in unsized.detail
    # a slow instance is carried by a wider vertex, at a price: measured on the runtime corpus
    slow = RootCause("map", "slow-subtask", (1,), 1.0, recommended_parallelism=None)
    [carried] = verdicts(decision, (slow,), obs)
    assert carried.verdict == "over-provisions"
    assert "subtask 1" in carried.detail and "move or restart" in carried.detail
    starved = RootCause("map", "resource-starved", (0, 1), 0.9, recommended_parallelism=1)
    assert verdicts(decision, (starved,), obs)[0].verdict == "scales-ineffectively"


def test_options_come_from_a_flink_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(
        "# the team's FlinkDeployment flinkConfiguration\n"
        "job.autoscaler.enabled: true\n"
        "job.autoscaler.utilization.target: 0.8\n"
        "job.autoscaler.catch-up.duration: 10 min\n"
        "kubernetes.operator.job.autoscaler.metrics.busy-time.aggregator: avg\n"
        "taskmanager.numberOfTaskSlots: 4\n"
    )
    config = load_autoscaler_config(path)
    assert config.utilization_target == 0.8
    assert config.catch_up_s == 600.0
    assert config.busy_time_aggregator == "AVG"
    assert config.vertex_max_parallelism == 200  # the default, untouched
    assert (
        decide(observation(source(task(0, 0.1, 10)))).config["job.autoscaler.catch-up.duration"]
        == 1800.0
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "job.autoscaler.utilization.target: lots",
            "utilization.target = 'lots': expected a number",
        ),
        ("job.autoscaler.catch-up.duration: soon", "expected a duration (30 min)"),
        ("job.autoscaler.vertex.max-parallelism: 2.5", "expected an integer"),
        ("just some words", "is not 'key: value'"),
        ("job.autoscaler.utilization.target: 1.5", "utilization.target must be above 0"),
    ],
)
def test_a_malformed_option_is_one_line_naming_the_key_and_the_type(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"job.autoscaler.enabled: true\n{line}\n")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_autoscaler_config(path)
