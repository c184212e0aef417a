"""Capacity, the DS2-style offered rate, and the recommendation's numbers."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from bpmon.model.values import Observation
from bpmon.rules.advice import capacity_of_windows, key_groups
from bpmon.rules.config import BottleneckRules, CapacityRules, RulesConfig
from bpmon.rules.engine import diagnose
from bpmon.rules.graph import build_graph
from bpmon.rules.offered import offered_rates

from .figures import problems, texts
from .observations import edge, lag, observation, sub, vertex
from .sentences import unaccounted

RULES = RulesConfig()


def test_capacity_is_records_in_over_busy_from_the_time_accounting() -> None:
    # time view busy = 0.5 - 0.1 / 2 = 0.45: 450 records/s at 45% busy -> 1000 at 100%.
    assert capacity_of_windows([sub(0, busy=0.5, rin=450, drift=0.1)], 0.05) == pytest.approx(1000)


def test_capacity_averages_subtasks_and_skips_nearly_idle_ones() -> None:
    subs = [sub(0, busy=0.5, rin=500, timed=False), sub(1, busy=1.0, rin=2000, timed=False),
            sub(2, busy=0.01, rin=90, timed=False)]  # fmt: skip
    assert capacity_of_windows(subs, 0.05) == pytest.approx(1500)
    assert capacity_of_windows([sub(0, busy=0.5)], 0.05) is None


def test_offered_rate_is_records_out_plus_lag_growth_and_follows_the_edges() -> None:
    # src emits 1000/s and owes 4000/s more each second: 5000/s offered. x2 doubles the records;
    # a broadcast edge gives each of fan's 2 subtasks all of them.
    obs = observation(
        vertex("src", sub(0, bp=0.8, busy=0.05, rout=1000, metrics=lag(4000))),
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


def test_a_source_catching_up_offers_what_it_emits_less_what_it_pays_back() -> None:
    obs = observation(
        vertex("src", sub(0, rout=1000, metrics=lag(-300))),
        vertex("map", sub(0, busy=0.9, rin=1000), inputs=[edge("src")]),
    )
    assert offered_rates(obs, build_graph(obs), RULES)["map"] == pytest.approx(700)


def test_without_pending_records_the_offered_rate_is_unknown_not_guessed() -> None:
    # The old DS2 guess, 100 / (1 - 0.99), would say 10,000/s: 100 times what is emitted.
    obs = observation(
        vertex("src", sub(0, bp=0.99, rout=100)),
        vertex("map", sub(0, busy=0.9, rin=100), inputs=[edge("src")]),
    )
    assert offered_rates(obs, build_graph(obs), RULES)["map"] is None
    blind = observation(
        vertex("src", sub(0, bp=0.9, timed=False, metrics=lag(10))),
        vertex("map", sub(0, busy=0.9, rin=100), inputs=[edge("src")]),
    )
    assert offered_rates(blind, build_graph(blind), RULES)["map"] is None


def test_recommended_parallelism_is_the_least_that_takes_the_offered_rate_at_the_target() -> None:
    # Offered 2 x (1000 + 4000) = 10000/s; capacity 1000/s per subtask (500 at 50% busy);
    # at 90% utilisation: ceil(10000 / 900) = 12 subtasks, each then 10000 / 12000 = 83% busy.
    obs = observation(
        vertex("src", sub(0, bp=0.8, busy=0.05, rout=1000, timed=False, metrics=lag(4000)),
               sub(1, bp=0.8, busy=0.05, rout=1000, timed=False, metrics=lag(4000))),
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
    expected = math.ceil(10000 / (1000 * 0.9))
    assert expected == 12
    assert cause.recommended_parallelism == expected
    assert cause.offered_rate == pytest.approx(10000)
    assert cause.capacity_per_subtask == pytest.approx(1000)
    assert re.search(rf"\b{expected} subtasks instead of 4\b", cause.recommendation)
    assert "at 83% utilisation" in cause.recommendation
    headroom = RulesConfig(
        bottleneck=BottleneckRules(busy_min=0.4), capacity=CapacityRules(utilisation_target=0.7)
    )
    roomy = diagnose(obs, headroom).root_causes
    assert roomy and roomy[0].recommended_parallelism == math.ceil(10000 / 700)


def test_without_pending_records_the_offered_rate_is_estimated_and_says_so() -> None:
    """1,000 records/s out while held back 40% of the window: ~1,667 records/s offered."""
    obs = observation(
        vertex("src", sub(0, bp=0.40, busy=0.02, rout=1000)),
        vertex("op", sub(0, busy=0.97, rin=1000, rout=1000), inputs=[edge("src")]),
        vertex("out", sub(0, busy=0.05, rin=1000), inputs=[edge("op")]),
    )
    [cause] = diagnose(obs, RULES).root_causes or ()
    assert cause.offered_rate == 1667.0
    assert cause.capacity_per_subtask is not None
    wanted = math.ceil(1667 / (cause.capacity_per_subtask * RULES.capacity.utilisation_target))
    assert cause.recommended_parallelism == wanted
    assert any("(estimated: the sources report no pendingRecords" in e for e in texts(cause))


def test_an_estimated_offer_says_how_uncertain_it_is() -> None:
    """A source without pendingRecords only says it would send more than the 1,000 records/s
    that reach op: that is the least it is offered, and the estimate (here 1,667) may be up to
    twice too high or short by any amount. A source that reports its lag gets no such line."""
    obs = observation(
        vertex("src", sub(0, bp=0.40, busy=0.02, rout=1000)),
        vertex("op", sub(0, busy=0.97, rin=1000, rout=1000), inputs=[edge("src")]),
        vertex("out", sub(0, busy=0.05, rin=1000), inputs=[edge("op")]),
    )
    report = diagnose(obs, RULES)
    assert problems(report) == []  # every figure the lines state is the report's
    [cause] = report.root_causes or ()
    [uncertain] = [e for e in cause.evidence if e.text.startswith("how uncertain")]
    assert uncertain.text.startswith("how uncertain: ~1,000 records/s reach it now, the least")
    assert "up to twice the true rate, or short of it by any amount" in uncertain.text
    [delivered] = uncertain.figures
    assert (delivered.what, delivered.vertex, delivered.value) == ("delivered", "op", 1000.0)
    measured = observation(
        vertex("src", sub(0, bp=0.40, busy=0.02, rout=1000, metrics=lag(600))),
        vertex("op", sub(0, busy=0.97, rin=1000, rout=1000), inputs=[edge("src")]),
        vertex("out", sub(0, busy=0.05, rin=1000), inputs=[edge("op")]),
    )
    [known] = diagnose(measured, RULES).root_causes or ()
    assert known.offered_rate == 1600.0
    assert not any(e.startswith("how uncertain") for e in texts(known))


def test_an_estimate_is_at_most_twice_what_the_sources_emit() -> None:
    """Held back 95% of the time, a rate-limited source would read 20 times its offer."""
    for held in (0.95, 1.0):
        obs = observation(
            vertex("src", sub(0, bp=held, busy=0.0, rout=1000)),
            vertex("op", sub(0, busy=0.97, rin=1000, rout=1000), inputs=[edge("src")]),
        )
        [cause] = diagnose(obs, RULES).root_causes or ()
        assert cause.offered_rate == 2000.0


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


def test_a_busy_vertex_that_took_next_to_no_record_is_not_sized_and_does_not_crash() -> None:
    # 0.3 records/s at 97% busy: a capacity that rounds to 0 sizes nothing (it divided by 0).
    obs = observation(
        vertex("src", sub(0, bp=0.95, busy=0.02, rout=0.3, metrics=lag(500))),
        vertex("op", sub(0, busy=0.97, rin=0.3, rout=0.3), inputs=[edge("src")]),
        vertex("out", sub(0, busy=0.05, rin=0.3), inputs=[edge("op")]),
    )
    report = diagnose(obs, RULES)
    assert report.root_causes
    cause = report.root_causes[0]
    assert cause.capacity_per_subtask is None and cause.recommended_parallelism is None
    assert "no record rates" in cause.recommendation


def test_behind_a_broadcast_more_parallelism_is_not_recommended() -> None:
    # every subtask of rules gets every record: doubling them doubles the work, not the rate
    obs = observation(
        vertex("src", sub(0, bp=0.9, busy=0.02, rout=1000, metrics=lag(1000))),
        vertex("rules", sub(0, busy=0.98, rin=1000, rout=1000),
               sub(1, busy=0.97, rin=1000, rout=1000), inputs=[edge("src", "broadcast")]),
        vertex("out", sub(0, busy=0.05, rin=2000), inputs=[edge("rules")]),
    )  # fmt: skip
    report = diagnose(obs, RULES)
    assert report.root_causes
    cause = report.root_causes[0]
    assert cause.vertex == "rules" and cause.recommended_parallelism is None
    assert "broadcast" in cause.recommendation


def _hashed(hot_in: float, cold_in: float, growth: float) -> object:
    """src (2 x 600/s emitted, lag growing by ``growth`` each) -> hash -> store p=3 (a sink).

    store[0] takes ``hot_in`` records/s at 100% busy, the other two ``cold_in`` at the same time
    per record: a sink with a hot key, the kind ``slow-sink`` names with its hot subtask.
    """
    cold_busy = cold_in / hot_in
    return observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, rout=600, timed=False, metrics=lag(growth)),
               sub(1, bp=0.9, busy=0.05, rout=600, timed=False, metrics=lag(growth))),
        vertex("store", sub(0, busy=1.0, rin=hot_in, timed=False),
               sub(1, busy=cold_busy, rin=cold_in, timed=False),
               sub(2, busy=cold_busy, rin=cold_in, timed=False),
               inputs=[edge("src", "hash")], kind="sink"),
    )  # fmt: skip


def test_a_hot_subtask_behind_a_hash_exchange_is_sized_for_its_share() -> None:
    # store[0] receives 600 of 1200 records/s: share 1/2 = f + (1 - f) / 3, so f = 1/4 of the
    # records are on one key. Offered 2 x (600 + 900) = 3000/s; store[0] takes 600/s at 100%
    # busy, 540 at the 90% target. One key alone brings 3000 x 1/4 = 750 > 540: no parallelism
    # takes it, the key must be spread.
    report = diagnose(_hashed(600, 300, 900), RULES)  # type: ignore[arg-type]
    assert not problems(report) and not unaccounted(report)  # every figure is the table's
    assert report.root_causes
    cause = report.root_causes[0]
    assert (cause.vertex, cause.kind, cause.subtasks) == ("store", "slow-sink", (0,))
    assert cause.recommended_parallelism is None
    assert cause.capacity_per_subtask == pytest.approx(600)  # store[0]'s, not the mean
    assert "Spread the hot key(s) that land on store[0]: ~750 records/s of one key" in (
        cause.recommendation
    )


def test_a_mildly_hot_subtask_gets_the_least_parallelism_its_share_allows() -> None:
    # store[0] receives 600 of 1400 records/s: share 3/7 = f + (1 - f) / 3, so f = 1/7.
    # Offered 2 x (600 + 150) = 1500/s. At p subtasks store[0] receives 1500 x (1/7 + 6/7 / p):
    # p = 4 gives 1500 x 5/14 = 535.7 <= 540 (p = 3 is now: 642.9). So 4, leaving it 36%.
    report = diagnose(_hashed(600, 400, 150), RULES)  # type: ignore[arg-type]
    assert not problems(report) and not unaccounted(report)
    assert report.root_causes
    cause = report.root_causes[0]
    assert (cause.vertex, cause.kind, cause.subtasks) == ("store", "slow-sink", (0,))
    assert cause.recommended_parallelism == 4
    assert "4 subtasks instead of 3 would leave store[0] 36% of the ~1,500 records/s" in (
        cause.recommendation
    )


def _keyed(growth: float) -> object:
    """src (2 x 450/s emitted, lag growing by ``growth`` each) -> hash -> count p=3 -> out.

    count[0] takes 600 records/s at 100% busy, the other two 150 at 25%: the same time per record,
    four times the records: the kind ``data-skew`` names with its hot subtask.
    """
    return observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, rout=450, timed=False, metrics=lag(growth)),
               sub(1, bp=0.9, busy=0.05, rout=450, timed=False, metrics=lag(growth))),
        vertex("count", sub(0, busy=1.0, rin=600, rout=600, timed=False),
               sub(1, busy=0.25, rin=150, rout=150, timed=False),
               sub(2, busy=0.25, rin=150, rout=150, timed=False),
               inputs=[edge("src", "hash")]),
        vertex("out", sub(0, busy=0.05, rin=900, timed=False),
               inputs=[edge("count", "rebalance")], kind="sink"),
    )  # fmt: skip


def test_a_hot_key_whose_share_fits_one_subtask_is_sized_and_one_that_does_not_is_not() -> None:
    # count[0] receives 600 of 900 records/s: share 2/3 = f + (1 - f) / 3, so f = 1/2 on keys no
    # parallelism splits (the worst case: all of it one key). Lag growing 50/s a source: offered
    # 900 + 100 = 1000/s; count[0] takes 600/s, 540 at the 90% target. At p subtasks it receives
    # 1000 x (1/2 + 1/2 / p) <= 540 from p = 12.5: 13, leaving it 53.8% at 89.7% busy.
    report = diagnose(_keyed(50), RULES)  # type: ignore[arg-type]
    assert not problems(report) and not unaccounted(report)
    cause = report.root_causes[0]
    assert (cause.vertex, cause.kind, cause.subtasks) == ("count", "data-skew", (0,))
    assert cause.recommended_parallelism == 13
    assert "13 subtasks instead of 3 would leave the hottest 54% of the ~1,000 records/s" in (
        cause.recommendation
    )
    assert "at 90% utilisation" in cause.recommendation
    assert cause.recommendation.startswith("Spread the hot key(s) that land on count[0]")
    # lag growing 200/s a source: 1,300/s offered, 650 on one key alone above the 540: none
    hotter = diagnose(_keyed(200), RULES)  # type: ignore[arg-type]
    assert not problems(hotter) and not unaccounted(hotter)
    [cause] = hotter.root_causes
    assert (cause.kind, cause.recommended_parallelism) == ("data-skew", None)
    assert "more parallelism does not split one key" in cause.recommendation


def test_a_hot_key_sized_past_the_bound_is_not_recommended_and_says_what_it_would_take() -> None:
    # f = 1/2 as above; lag growing 60/s a source: offered 1,020/s. At p subtasks count[0]
    # receives 1020 x (1/2 + 1/2 / p) <= 540 from p = 17 (16.99...): past the 16 bpmon
    # recommends at most for a skew on 3 subtasks (4 x 3 = 12 is less), so the key is to be
    # spread, and the evidence says 17 would be needed counting the unsplit part as one key.
    report = diagnose(_keyed(60), RULES)  # type: ignore[arg-type]
    assert not problems(report) and not unaccounted(report)  # the 17 is checked too
    [cause] = report.root_causes
    assert (cause.kind, cause.recommended_parallelism) == ("data-skew", None)
    [needed] = [line for line in texts(cause) if "would need" in line]
    assert "~17 subtasks instead of 3, more than the 16 bpmon recommends" in needed
    assert cause.recommendation.startswith("Spread the hot key(s) that land on count[0]")


def test_the_bound_is_the_key_groups_or_four_times_today() -> None:
    wide = vertex("w", *(sub(i) for i in range(12)), inputs=[edge("src", "hash")])
    assert key_groups(wide) == 128  # Flink's default below 86 subtasks
    assert key_groups(vertex("v", *(sub(i) for i in range(100)))) == 256  # 150 -> 256
    assert key_groups(replace(wide, max_parallelism=40)) == 40  # what Flink reports


def _in_series(next_busy: float) -> Observation:
    """src (offering 3,000/s) -> op (2 x 1,000/s, saturated) -> next (1 subtask, 2,000/s in
    at ``next_busy``) -> sink."""
    return observation(
        vertex("src", sub(0, bp=0.8, busy=0.05, rout=1000, timed=False, metrics=lag(500)),
               sub(1, bp=0.8, busy=0.05, rout=1000, timed=False, metrics=lag(500))),
        vertex("op", sub(0, busy=1.0, rin=1000, rout=1000, timed=False),
               sub(1, busy=1.0, rin=1000, rout=1000, timed=False), inputs=[edge("src")]),
        vertex("next", sub(0, busy=next_busy, rin=2000, rout=2000, timed=False),
               inputs=[edge("op")]),
        vertex("sink", sub(0, busy=0.1, rin=2000, timed=False), inputs=[edge("next")]),
    )  # fmt: skip


def test_a_vertex_after_the_bottleneck_that_could_not_take_the_rate_is_named_next() -> None:
    # next handles 2,000 / 0.8 = 2,500/s and would be offered 3,000/s once op keeps up:
    # ceil(3000 / (2500 x 0.9)) = 2 subtasks, then at 3000 / 5000 = 60%.
    report = diagnose(_in_series(0.8), RULES)
    assert problems(report) == [] and report.root_causes
    cause = report.root_causes[0]
    assert (cause.vertex, cause.recommended_parallelism) == ("op", math.ceil(3000 / 900))
    assert (
        "next in series: next handles ~2,500 records/s per subtask x 1 and would then be "
        "offered ~3,000: it would limit next; 2 subtasks would take it at 60%"
    ) in texts(cause)
    assert cause.recommendation.endswith(
        "Then next would limit next: give it 2 subtasks instead of 1 as well."
    )


def test_a_vertex_after_the_bottleneck_with_room_for_the_rate_is_not_named() -> None:
    report = diagnose(_in_series(0.6), RULES)  # 2,000 / 0.6 = 3,333/s: room for 3,000/s
    assert problems(report) == [] and report.root_causes
    cause = report.root_causes[0]
    assert cause.vertex == "op"
    assert not any(line.startswith("next in series") for line in texts(cause))
    assert "limit next" not in cause.recommendation


def test_a_vertex_held_back_before_the_bottleneck_that_could_not_take_the_rate_is_named_next() -> (
    None
):
    """src (offering 3,000/s) -> pre (1 subtask, 2,000/s in at busy 0.8: ~2,500/s, held back by
    op now) -> op (2 x 1,000/s, saturated) -> sink. Once op keeps up, pre is offered 3,000/s."""
    held = observation(
        vertex("src", sub(0, bp=0.8, busy=0.05, rout=1000, timed=False, metrics=lag(500)),
               sub(1, bp=0.8, busy=0.05, rout=1000, timed=False, metrics=lag(500))),
        vertex("pre", sub(0, bp=0.2, busy=0.8, rin=2000, rout=2000, timed=False),
               inputs=[edge("src")]),
        vertex("op", sub(0, busy=1.0, rin=1000, rout=1000, timed=False),
               sub(1, busy=1.0, rin=1000, rout=1000, timed=False), inputs=[edge("pre")]),
        vertex("sink", sub(0, busy=0.1, rin=2000, timed=False), inputs=[edge("op")]),
    )  # fmt: skip
    report = diagnose(held, RULES)
    assert problems(report) == [] and report.root_causes
    [cause] = report.root_causes
    assert cause.vertex == "op"
    assert [(n.vertex, n.recommended_parallelism) for n in cause.next_in_series] == [("pre", 2)]
    assert (
        "next in series: pre handles ~2,500 records/s per subtask x 1 and would then be "
        "offered ~3,000: it would limit next; 2 subtasks would take it at 60%"
    ) in texts(cause)
