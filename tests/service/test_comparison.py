"""Two reports of one job compared: a moved bottleneck, a dropped capacity, a cause come or gone."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bpmon.model.values import Edge, Metrics, Report, RootCause, SubtaskStatus, VertexStatus, Window
from bpmon.service.comparison import capacity_of_vertex, compare

START = datetime(2026, 11, 23, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(seconds=5), 100, 50.0)


def vertex(
    name: str, busy: float, rate: float, *, inputs: tuple[str, ...] = ("src",)
) -> VertexStatus:
    subtasks = tuple(
        SubtaskStatus(
            i, "OK", 0.0, Metrics(busy_ratio=busy, records_in_per_s=rate, records_out_per_s=rate)
        )
        for i in range(2)
    )
    return VertexStatus(
        name, 2, "OK", 0.0, Metrics(busy_ratio=busy), tuple(Edge(s) for s in inputs), subtasks
    )


def report(*vertices: VertexStatus, causes: tuple[RootCause, ...] | None = ()) -> Report:
    return Report("run", "job", "runtime", WINDOW, vertices, causes)


SRC = vertex("src", 0.1, 1000, inputs=())


def test_a_moved_bottleneck_is_the_first_change() -> None:
    before = report(
        SRC, vertex("map", 1.0, 500), causes=(RootCause("map", "slow-operator", (0, 1)),)
    )
    after = report(SRC, vertex("map", 0.3, 900), vertex("sink", 1.0, 900, inputs=("map",)),
                   causes=(RootCause("sink", "slow-sink", (0,)),))  # fmt: skip
    result = compare(before, after)
    assert result.moved is not None and result.changes[0] is result.moved
    assert result.moved.detail == (
        "the bottleneck moved from map (slow-operator, subtasks 0, 1) "
        "to sink (slow-sink, subtask 0)"
    )
    assert [c.kind for c in result.changes] == ["moved-bottleneck", "vertex-added"]


def test_a_capacity_that_dropped_more_than_the_threshold_is_named() -> None:
    before = report(SRC, vertex("map", 0.8, 800))  # 1,000 records/s per subtask at 100% busy
    after = report(SRC, vertex("map", 0.8, 480))  # 600
    result = compare(before, after)
    (drop,) = [c for c in result.changes if c.kind == "capacity-drop"]
    assert (
        drop.detail == "the capacity of map dropped from 1,000 to 600 records/s per subtask (-40%)"
    )
    slight = compare(before, report(SRC, vertex("map", 0.8, 720)))  # -10%: noise, not a drop
    assert not [c for c in slight.changes if c.kind == "capacity-drop"]


def test_a_vertex_s_capacity_is_the_one_definition_whoever_is_the_cause() -> None:
    busy = vertex("map", 0.9, 900)
    sized = report(
        SRC, busy, causes=(RootCause("map", "slow-operator", capacity_per_subtask=1234.0),)
    )
    assert capacity_of_vertex(busy) == 1000.0  # the vertex's, as bpmon analyze tracks it
    row = next(r for r in compare(sized, sized).vertices if r.name == "map")
    assert row.capacity_before == row.capacity_after == 1000.0
    assert capacity_of_vertex(vertex("map", 0.3, 300)) == 1000.0  # busy enough to tell
    assert capacity_of_vertex(vertex("map", 0.03, 30)) is None  # too idle to tell
    assert capacity_of_vertex(vertex("map", 0.3, 300), min_busy=0.5) is None  # the rules'


def test_a_capacity_drop_beside_a_parallelism_change_says_so() -> None:
    before = report(SRC, vertex("map", 0.8, 800))
    rescaled = vertex("map", 0.8, 400)  # 500 records/s per subtask at 100% busy, and 6 of them
    after = report(SRC, replace(rescaled, parallelism=6))
    (drop,) = [c for c in compare(before, after).changes if c.kind == "capacity-drop"]
    assert drop.detail.startswith("the capacity of map dropped from 1,000 to 500")
    assert drop.detail.endswith(
        "; map runs 6 subtasks instead of 2: the parallelism changed between the runs"
    )
    plain = compare(before, report(SRC, rescaled)).changes
    assert [c.detail for c in plain if c.kind == "capacity-drop"] == [
        "the capacity of map dropped from 1,000 to 500 records/s per subtask (-50%)"
    ]


def test_causes_that_appear_or_go_away_and_levels_that_change() -> None:
    calm = report(SRC, vertex("map", 0.5, 250))  # 500 records/s at 100% busy, as jammed
    jammed = report(replace(SRC, level="HIGH", ratio=0.9), vertex("map", 1.0, 500),
                    causes=(RootCause("map", "slow-operator"),))  # fmt: skip
    worse = compare(calm, jammed)
    assert [c.kind for c in worse.changes] == ["new-cause", "level-worsened"]
    better = compare(jammed, calm)
    assert [c.kind for c in better.changes] == ["resolved", "level-improved"]
    assert compare(calm, report(SRC, vertex("map", 0.5, 250), causes=None)).changes == ()
