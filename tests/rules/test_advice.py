"""Capacity, the DS2-style offered rate, and the recommendation's numbers."""

from __future__ import annotations

import math
import re

import pytest

from bpmon.rules.advice import capacity_per_subtask, offered_rates
from bpmon.rules.config import BottleneckRules, CapacityRules, RulesConfig
from bpmon.rules.engine import diagnose
from bpmon.rules.graph import build_graph

from .observations import edge, observation, sub, vertex

RULES = RulesConfig()


def test_capacity_is_records_in_over_busy_from_the_time_accounting() -> None:
    # time view busy = 0.5 - 0.1 / 2 = 0.45: 450 records/s at 45% busy -> 1000 at 100%.
    assert capacity_per_subtask([sub(0, busy=0.5, rin=450, drift=0.1)], 0.05) == pytest.approx(1000)


def test_capacity_averages_subtasks_and_skips_nearly_idle_ones() -> None:
    subs = [sub(0, busy=0.5, rin=500, timed=False), sub(1, busy=1.0, rin=2000, timed=False),
            sub(2, busy=0.01, rin=90, timed=False)]  # fmt: skip
    assert capacity_per_subtask(subs, 0.05) == pytest.approx(1500)
    assert capacity_per_subtask([sub(0, busy=0.5)], 0.05) is None


def test_offered_rate_comes_from_the_sources_and_follows_the_edges() -> None:
    # src emits 1000/s while 80% blocked: 5000/s offered. x2 emits 2 records per record in.
    obs = observation(
        vertex("src", sub(0, bp=0.8, busy=0.05, rout=1000, timed=False)),
        vertex("x2", sub(0, busy=0.9, rin=1000, rout=2000), inputs=[edge("src")]),
        vertex("fan", sub(0, busy=0.1, rin=2000, rout=2000), sub(1, busy=0.1, rin=2000,
               rout=2000), inputs=[edge("x2", "broadcast")]),
        vertex("sink", sub(0, busy=0.1, rin=4000), inputs=[edge("fan")]),
    )  # fmt: skip
    offered = offered_rates(obs, build_graph(obs), RULES)
    assert offered["src"] is None
    assert offered["x2"] == pytest.approx(5000)
    assert offered["fan"] == pytest.approx(2 * 10000)
    assert offered["sink"] == pytest.approx(20000)


def test_offered_rate_caps_the_source_backpressure_and_needs_rates() -> None:
    obs = observation(
        vertex("src", sub(0, bp=1.0, rout=100, timed=False)),
        vertex("map", sub(0, busy=0.9, rin=100), inputs=[edge("src")]),
    )
    offered = offered_rates(obs, build_graph(obs), RULES)
    assert offered["map"] == pytest.approx(100 / (1 - 0.95))
    capped = RulesConfig(capacity=CapacityRules(max_producer_backpressure=0.5))
    assert offered_rates(obs, build_graph(obs), capped)["map"] == pytest.approx(200)
    blind = observation(
        vertex("src", sub(0, bp=0.9, timed=False)),
        vertex("map", sub(0, busy=0.9, rin=100), inputs=[edge("src")]),
    )
    assert offered_rates(blind, build_graph(blind), RULES)["map"] is None


def test_recommended_parallelism_is_offered_over_capacity_at_the_target() -> None:
    # Offered 2 x 1000 / (1 - 0.8) = 10000/s; capacity 1000/s per subtask (500 at 50% busy);
    # at 70% utilisation: ceil(10000 / 700) = 15 subtasks.
    obs = observation(
        vertex("src", sub(0, bp=0.8, busy=0.05, rout=1000, timed=False),
               sub(1, bp=0.8, busy=0.05, rout=1000, timed=False)),
        vertex("op", sub(0, busy=0.5, rin=500, rout=500, timed=False),
               sub(1, busy=0.5, rin=500, rout=500, timed=False),
               sub(2, busy=0.5, rin=500, rout=500, timed=False),
               sub(3, busy=0.5, rin=500, rout=500, timed=False), inputs=[edge("src")]),
        vertex("sink", sub(0, busy=0.05, rin=2000, timed=False), inputs=[edge("op")]),
    )  # fmt: skip
    # op is only 50% busy: give it a lower busy_min so that it is the suspect.
    rules = RulesConfig(bottleneck=BottleneckRules(busy_min=0.4))
    report = diagnose(obs, rules)
    assert report.root_causes
    cause = report.root_causes[0]
    expected = math.ceil(10000 / (1000 * 0.7))
    assert re.search(rf"about {expected} subtasks instead of 4", cause.recommendation)


def test_without_rates_the_recommendation_says_it_cannot_size() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, timed=False)),
        vertex("op", sub(0, busy=0.97, timed=False), inputs=[edge("src")]),
        vertex("out", sub(0, busy=0.05, timed=False), inputs=[edge("op")]),
        source="pyspy",
    )
    report = diagnose(obs, RULES)
    assert report.root_causes
    assert "no record rates" in report.root_causes[0].recommendation
