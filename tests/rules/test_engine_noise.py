"""The diagnosis holds under the noise of real runs (thresholds are not tuned to clean inputs).

Each shape is drawn many times with a seeded random: a bottleneck 85-100% busy, victims 90-100%
backpressured, idle consumers 70-100% idle, time accounting within 0.1 of the samples, record
rates within 5%. The expected answer is the scenario's (spec/scenarios/*.toml [expect]).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from bpmon.model.values import Observation, SubtaskWindow, TargetSettings
from bpmon.rules.config import RulesConfig
from bpmon.rules.engine import diagnose

from .observations import edge, observation, sub, vertex

Shape = Callable[[random.Random], Observation]


def victim(rng: random.Random, i: int, rate: float, tm: int = 0, **kw: float) -> SubtaskWindow:
    bp = rng.uniform(0.9, 1.0)
    return sub(i, bp=bp, busy=min(0.05, 1 - bp), rout=_jit(rng, rate), tm=tm,
               drift=rng.uniform(-0.1, 0.1), out_pool=rng.uniform(0.9, 1.1), **kw)  # fmt: skip


def bottleneck(rng: random.Random, i: int, rate: float, tm: int = 0) -> SubtaskWindow:
    return sub(i, bp=rng.uniform(0.0, 0.03), busy=rng.uniform(0.85, 0.97), rin=_jit(rng, rate),
               rout=_jit(rng, rate), tm=tm, in_pool=rng.uniform(0.8, 1.0),
               drift=rng.uniform(-0.1, 0.1))  # fmt: skip


def idler(rng: random.Random, i: int, rate: float, tm: int = 0) -> SubtaskWindow:
    busy = 1 - rng.uniform(0.7, 1.0)
    return sub(i, busy=busy, rin=_jit(rng, rate), rout=_jit(rng, rate), tm=tm,
               in_pool=rng.uniform(0.0, 0.2), drift=rng.uniform(-0.1, 0.1))  # fmt: skip


def cold(rng: random.Random, i: int, rate: float, cost_s: float, tm: int = 0) -> SubtaskWindow:
    """A subtask of a keyed operator that gets few records: busy in proportion to them."""
    busy = rate * cost_s * rng.uniform(0.7, 1.3)
    return sub(i, busy=busy, rin=_jit(rng, rate), rout=_jit(rng, rate), tm=tm,
               in_pool=rng.uniform(0.0, 0.2), drift=rng.uniform(-0.05, 0.05))  # fmt: skip


def _jit(rng: random.Random, rate: float) -> float:
    return rate * rng.uniform(0.95, 1.05)


def chain(rng: random.Random) -> Observation:
    return observation(
        vertex("source", victim(rng, 0, 1000), victim(rng, 1, 1000, tm=1), kind="source"),
        vertex("parse", victim(rng, 0, 1000, rin=1000), victim(rng, 1, 1000, tm=1, rin=1000),
               inputs=[edge("source", "forward")]),
        vertex("enrich", bottleneck(rng, 0, 1000), bottleneck(rng, 1, 1000, tm=1),
               inputs=[edge("parse")]),
        vertex("sink", idler(rng, 0, 2000), inputs=[edge("enrich")], kind="sink"),
    )  # fmt: skip


def slow_sink(rng: random.Random) -> Observation:
    return observation(
        vertex("source", victim(rng, 0, 1250), victim(rng, 1, 1250, tm=1), kind="source"),
        vertex("transform", victim(rng, 0, 1250, rin=1250),
               victim(rng, 1, 1250, tm=1, rin=1250), inputs=[edge("source", "forward")]),
        vertex("db-writer", bottleneck(rng, 0, 1250), bottleneck(rng, 1, 1250, tm=1),
               inputs=[edge("transform")], kind="sink"),
    )  # fmt: skip


def hot_key(rng: random.Random) -> Observation:
    sources = [sub(i, bp=rng.uniform(0.35, 0.6), busy=0.03, rout=_jit(rng, 1613), tm=i,
                   drift=rng.uniform(-0.1, 0.1)) for i in range(2)]  # fmt: skip
    return observation(
        vertex("source", *sources, kind="source"),
        vertex("count-by-user", bottleneck(rng, 0, 2500),
               *(cold(rng, i, 242, 0.91 / 2500, tm=i % 2) for i in range(1, 4)),
               inputs=[edge("source", "hash")]),
        vertex("sink", idler(rng, 0, 3226), inputs=[edge("count-by-user")], kind="sink"),
    )  # fmt: skip


def slow_subtask(rng: random.Random) -> Observation:
    sources = [sub(i, bp=rng.uniform(0.6, 0.85), busy=0.03, rout=_jit(rng, 750), tm=i,
                   drift=rng.uniform(-0.1, 0.1)) for i in range(2)]  # fmt: skip
    return observation(
        vertex("source", *sources, kind="source"),
        vertex("score", idler(rng, 0, 500), idler(rng, 1, 500, tm=1), bottleneck(rng, 2, 500),
               inputs=[edge("source")]),
        vertex("sink", idler(rng, 0, 1500), inputs=[edge("score")], kind="sink"),
    )  # fmt: skip


def fan_in(rng: random.Random) -> Observation:
    return observation(
        vertex("clicks", victim(rng, 0, 560), victim(rng, 1, 560, tm=1), kind="source"),
        vertex("views", victim(rng, 0, 1100), kind="source"),
        vertex("merge", bottleneck(rng, 0, 1110), bottleneck(rng, 1, 1110, tm=1),
               inputs=[edge("clicks"), edge("views")]),
        vertex("sink", idler(rng, 0, 2220), inputs=[edge("merge")], kind="sink"),
    )  # fmt: skip


def diamond(rng: random.Random) -> Observation:
    return observation(
        vertex("source", victim(rng, 0, 600), victim(rng, 1, 600, tm=1), kind="source"),
        vertex("fast", idler(rng, 0, 600), idler(rng, 1, 600, tm=1), inputs=[edge("source")]),
        vertex("slow", bottleneck(rng, 0, 600), bottleneck(rng, 1, 600, tm=1),
               inputs=[edge("source")]),
        vertex("join", idler(rng, 0, 1200), idler(rng, 1, 1200, tm=1),
               inputs=[edge("fast"), edge("slow")]),
        vertex("sink", idler(rng, 0, 2400), inputs=[edge("join")], kind="sink"),
    )  # fmt: skip


def tcp(rng: random.Random) -> Observation:
    """Head-of-line blocking in one exchange: parse[0] waits behind store[2]'s connection."""
    return observation(
        vertex("events", victim(rng, 0, 100), idler(rng, 1, 600, tm=1), victim(rng, 2, 100),
               kind="source"),
        vertex("parse", victim(rng, 0, 100, tm=1, rin=100), idler(rng, 1, 600),
               victim(rng, 2, 100, tm=1, rin=100), inputs=[edge("events", "forward")]),
        vertex("store", idler(rng, 0, 100), idler(rng, 1, 600, tm=1), bottleneck(rng, 2, 100),
               inputs=[edge("parse", "forward")], kind="sink"),
        settings=TargetSettings(flow_control="tcp"),
    )  # fmt: skip


def network(rng: random.Random) -> Observation:
    return observation(
        vertex("source", victim(rng, 0, 400), victim(rng, 1, 400, tm=1), kind="source"),
        vertex("map", idler(rng, 0, 400), idler(rng, 1, 400, tm=1), inputs=[edge("source")]),
        vertex("sink", idler(rng, 0, 800), inputs=[edge("map")], kind="sink"),
    )  # fmt: skip


EXPECT: list[tuple[Shape, str, str, tuple[int, ...] | None]] = [
    (chain, "enrich", "slow-operator", None),
    (slow_sink, "db-writer", "slow-sink", None),
    (hot_key, "count-by-user", "data-skew", (0,)),
    (slow_subtask, "score", "slow-subtask", (2,)),
    (fan_in, "merge", "slow-operator", None),
    (diamond, "slow", "slow-operator", None),
    (tcp, "store", "slow-sink", (2,)),
    (network, "map", "network", None),
]


@pytest.mark.parametrize(
    ("shape", "cause", "kind", "subtasks"), EXPECT, ids=[e[0].__name__ for e in EXPECT]
)
def test_diagnosis_is_stable_under_run_noise(
    shape: Shape, cause: str, kind: str, subtasks: tuple[int, ...] | None
) -> None:
    rules = RulesConfig()
    rng = random.Random(f"noise-{cause}")
    for _ in range(60):
        report = diagnose(shape(rng), rules)
        got = [(c.vertex, c.kind) for c in report.root_causes or ()]
        assert got == [(cause, kind)], report
        if subtasks is not None:
            assert report.root_causes and report.root_causes[0].subtasks == subtasks
        assert report.root_causes[0].confidence >= 0.7, report.root_causes


# -- across the thresholds ------------------------------------------------------------------------


def faded_chain(rng: random.Random, busy: float, bp: float) -> Observation:
    """The chain with its signal turned down: enrich ``busy`` busy, its producers ``bp`` blocked.

    Both sweep across the thresholds (``busy_min`` 0.70, ``ok_max`` 0.10, ``low_max`` 0.50), with
    the run noise of the shapes above on top.
    """

    def producer(i: int, tm: int, rin: float | None = None) -> SubtaskWindow:
        b = min(1.0, max(0.0, bp + rng.uniform(-0.05, 0.05)))
        return sub(i, bp=b, busy=0.03, rin=rin, rout=_jit(rng, 1000), tm=tm,
                   out_pool=min(1.0, b + 0.1), drift=rng.uniform(-0.1, 0.1))  # fmt: skip

    def slow(i: int, tm: int) -> SubtaskWindow:
        b = min(1.0, max(0.0, busy + rng.uniform(-0.05, 0.05)))
        return sub(i, busy=b, rin=_jit(rng, 1000), rout=_jit(rng, 1000), tm=tm,
                   in_pool=min(1.0, 0.4 + b / 2), drift=rng.uniform(-0.1, 0.1))  # fmt: skip

    return observation(
        vertex("source", producer(0, 0), producer(1, 1), kind="source"),
        vertex("parse", producer(0, 0, 1000), producer(1, 1, 1000),
               inputs=[edge("source", "forward")]),
        vertex("enrich", slow(0, 0), slow(1, 1), inputs=[edge("parse")]),
        vertex("sink", idler(rng, 0, 2000), inputs=[edge("enrich")], kind="sink"),
    )  # fmt: skip


BUSY = [0.55, 0.65, 0.75, 0.85, 0.95]
BACKPRESSURE = [0.05, 0.15, 0.35, 0.55, 0.75, 0.95]


def test_across_the_thresholds_the_verdict_weakens_instead_of_flipping() -> None:
    """Never a wrong vertex named with confidence; the right one's confidence rises with the
    evidence; and it is named whenever both signals are clearly past their thresholds."""
    rules, rng = RulesConfig(), random.Random("across")
    confidence: dict[tuple[float, float], list[float]] = {}
    for busy in BUSY:
        for bp in BACKPRESSURE:
            for _ in range(12):
                report = diagnose(faded_chain(rng, busy, bp), rules)
                causes = report.root_causes or ()
                wrong = [c for c in causes if c.vertex != "enrich" and c.confidence >= 0.5]
                assert not wrong, (busy, bp, causes)
                right = [c.confidence for c in causes if c.vertex == "enrich"]
                confidence.setdefault((busy, bp), []).append(right[0] if right else 0.0)
                if busy >= 0.85 and bp >= 0.55:
                    assert causes and causes[0].vertex == "enrich", (busy, bp, causes)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    for bp in BACKPRESSURE[2:]:  # more busy, more sure (past the point where it is named)
        column = [mean(confidence[(b, bp)]) for b in BUSY]
        assert column[-1] > column[0], (bp, column)
        assert all(later >= earlier - 0.05 for earlier, later in itertools.pairwise(column)), column
    for busy in BUSY[2:]:  # more blocked producers, more sure
        row = [mean(confidence[(busy, b)]) for b in BACKPRESSURE]
        assert row[-1] > row[0], (busy, row)
        assert all(later >= earlier - 0.05 for earlier, later in itertools.pairwise(row)), row
