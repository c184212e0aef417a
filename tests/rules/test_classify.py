"""The kind of a bottleneck from how its subtasks differ: skew, slow instance, sink, spilling."""

from __future__ import annotations

import pytest

from bpmon.model.values import SubtaskWindow
from bpmon.rules.classify import Classification, busy_subtasks, classify
from bpmon.rules.config import KindRules, RulesConfig
from bpmon.rules.localize import localize

from .figures import texts
from .observations import edge, observation, spilled, sub, vertex

RULES = RulesConfig()


def kind_of(
    *subtasks: SubtaskWindow, kind: str = "map", rules: RulesConfig = RULES, src_bp: float = 0.9
) -> Classification:
    """Classify the vertex ``op`` fed by a source (HIGH by default) and feeding an idle sink."""
    obs = observation(
        vertex("src", sub(0, bp=src_bp, busy=0.05, rout=1000)),
        vertex("op", *subtasks, inputs=[edge("src", "hash")], kind=kind),
        vertex("out", sub(0, busy=0.05, rin=1000), inputs=[edge("op")], kind="sink"),
    )
    loc = localize(obs, rules)
    assert [s.vertex for s in loc.suspects] == ["op"]
    return classify(loc.suspects[0], loc, obs, rules)


def test_busy_subtasks_are_those_near_the_busiest() -> None:
    v = vertex("op", sub(0, busy=1.0), sub(1, busy=0.82), sub(2, busy=0.78), sub(3, busy=0.1))
    assert [s.index for s in busy_subtasks(v, RULES)] == [0, 1]


def test_every_subtask_busy_is_a_slow_operator() -> None:
    cls = kind_of(sub(0, busy=0.97, rin=300), sub(1, busy=0.95, rin=700))
    assert (cls.kind, cls.subtasks, cls.certainty) == ("slow-operator", (0, 1), 1.0)


def test_skew_at_exactly_the_ratio_is_data_skew() -> None:
    # 1.5x the records of the others (Dhalion's ratio), the hot subtask busy, the others not.
    cls = kind_of(sub(0, busy=0.98, rin=300), sub(1, busy=0.5, rin=200), sub(2, busy=0.5, rin=200))
    assert (cls.kind, cls.subtasks) == ("data-skew", (0,))


def test_below_the_skew_ratio_with_a_much_higher_time_per_record_is_a_slow_subtask() -> None:
    # 1.4x the records but 2.8x the time per record: (0.98 / 280) vs (0.25 / 200).
    cls = kind_of(
        sub(0, busy=0.98, rin=280), sub(1, busy=0.25, rin=200), sub(2, busy=0.25, rin=200)
    )
    assert (cls.kind, cls.subtasks) == ("slow-subtask", (0,))


def test_a_cold_subtask_whose_accounting_reads_far_below_its_samples_does_not_make_a_slow_one():
    """Recorded on Flink 2.3's hot-key job: the cold subtask's accounting read 4% busy where its
    samples read 22%, at 95 records/s of 1.5 ms each. By the accounting alone the hot subtask
    spends 4.6x as long per record (slow-subtask); with the samples too, 1.5x: the 4.9x records
    make it the hot key it is."""
    cold = sub(1, busy=0.22, rin=95, drift=2 * (0.22 - 0.043))
    assert cold.metrics.busy_ratio == pytest.approx(0.043)
    cls = kind_of(sub(0, busy=1.0, rin=470), cold)
    assert (cls.kind, cls.subtasks) == ("data-skew", (0,))


def test_a_cold_subtask_read_low_by_samples_too_is_no_slow_instance_while_its_producer_waits():
    """Recorded on Flink 2.3's hot-key job in CI: over a 1.2 s span the cold subtask read 6% busy
    at 134 records/s of 1.5 ms each (20% busy), and its samples too. Its time per record reads
    3.6x below the hot one's, but the hot subtask received 4.6x its records while the source
    was HIGH: a slow instance would have received no more than the other."""
    cls = kind_of(sub(0, busy=1.0, rin=614), sub(1, busy=0.061, rin=134))
    assert (cls.kind, cls.subtasks) == ("data-skew", (0,))
    assert "which a slow instance cannot cause" in texts(cls)[1]


def test_the_same_figures_with_a_producer_not_held_back_are_a_slow_instance() -> None:
    """A LOW producer was free most of the window: a slow instance's buffers may still be
    draining while the other has emptied, so its higher count proves nothing and the time per
    record decides."""
    cls = kind_of(sub(0, busy=1.0, rin=614), sub(1, busy=0.061, rin=134), src_bp=0.3)
    assert (cls.kind, cls.subtasks) == ("slow-subtask", (0,))


def test_mild_unevenness_that_neither_rule_explains_is_a_slow_operator() -> None:
    # Busy subtask 0.98 vs 0.75 (below 80% of the busiest), records 1.2x, time per record 1.1x.
    cls = kind_of(sub(0, busy=0.98, rin=240), sub(1, busy=0.75, rin=200))
    assert cls.kind == "slow-operator"


def test_a_stuck_subtask_that_receives_nothing_is_a_slow_subtask() -> None:
    cls = kind_of(sub(0, busy=0.99, rin=0), sub(1, busy=0.1, rin=100), sub(2, busy=0.1, rin=100))
    assert (cls.kind, cls.subtasks) == ("slow-subtask", (0,))
    assert any("unbounded" in line for line in texts(cls))


def test_without_record_rates_a_few_busy_subtasks_are_a_less_certain_slow_subtask() -> None:
    cls = kind_of(sub(0, busy=0.97, timed=False), sub(1, busy=0.2, timed=False))
    assert (cls.kind, cls.subtasks) == ("slow-subtask", (0,))
    assert cls.certainty == RULES.confidence.no_rates


def test_a_sink_is_a_slow_sink_even_with_one_busy_subtask() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, rout=1000)),
        vertex("db", sub(0, busy=0.97, rin=800), sub(1, busy=0.2, rin=200),
               inputs=[edge("src", "hash")], kind="sink"),
    )  # fmt: skip
    loc = localize(obs, RULES)
    cls = classify(loc.suspects[0], loc, obs, RULES)
    assert (cls.kind, cls.subtasks) == ("slow-sink", (0,))


def test_spilling_is_named_from_the_spill_figures() -> None:
    cls = kind_of(sub(0, busy=0.97, rin=500, metrics=spilled(2e6)), sub(1, busy=0.96, rin=500))
    assert (cls.kind, cls.subtasks) == ("spilling", (0,))
    higher = RulesConfig(kinds=KindRules(spill_bytes_per_s_min=3e6))
    plain = kind_of(sub(0, busy=0.97, rin=500, metrics=spilled(2e6)), sub(1, busy=0.96, rin=500),
                    rules=higher)  # fmt: skip
    assert plain.kind == "slow-operator"


@pytest.mark.parametrize("mechanism", ["network", "starved"])
def test_idle_mechanisms_keep_their_kind(mechanism: str) -> None:
    consumer = (
        vertex("map", sub(0, samples=0, timed=False), inputs=[edge("src")])
        if mechanism == "starved"
        else vertex("map", sub(0, busy=0.05, in_pool=0.0, tm=1), inputs=[edge("src")])
    )
    obs = observation(vertex("src", sub(0, bp=0.9, busy=0.05, out_pool=1.0, tm=0)), consumer)
    loc = localize(obs, RULES)
    cls = classify(loc.suspects[0], loc, obs, RULES)
    assert cls.kind == {"network": "network", "starved": "resource-starved"}[mechanism]
