"""The words of a few representative evidence lines, whole, and what a line carries besides them.

Everything else about evidence is checked on its figures (:mod:`.figures`); these pin the wording
a user reads, so a rewording is a decision. The figures in the expected lines are worked out by
hand from the observations (see each comment), not read from the rules.
"""

from __future__ import annotations

import json

from bpmon.model.evidence import EvidenceFigure, EvidenceLine, line, percent, subtasks
from bpmon.model.report_json import report_from_json, report_to_json
from bpmon.model.values import Observation, Report
from bpmon.rules.config import RulesConfig
from bpmon.rules.engine import diagnose

from .figures import number_problems, problems
from .observations import edge, lag, observation, sub, vertex

RULES = RulesConfig()


def _one_cause(obs: Observation) -> tuple[Report, list[str]]:
    report = diagnose(obs, RULES)
    assert problems(report) == []
    (cause,) = report.root_causes or ()
    return report, [e.text for e in cause.evidence]


def test_a_slow_operator_with_a_lag_reads_as_it_always_has() -> None:
    # map: 99% busy sampled, its time accounting 0.99 - 0.03 / 2 = 0.975 (the table's 0.97);
    # capacity 1,000 / 0.975 = 1,026 records/s; offered 1,000 emitted + 2,000 lag growth
    report, lines = _one_cause(
        observation(
            vertex("src", sub(0, bp=0.8, busy=0.03, rout=1000, out_pool=1.0, metrics=lag(2000.0))),
            vertex("map", sub(0, busy=0.99, rin=1000, rout=1000), inputs=[edge("src")]),
            vertex("sink", sub(0, busy=0.05, rin=1000), inputs=[edge("map")], kind="sink"),
        )
    )
    assert lines == [
        "the only subtask of map is busy 97%",
        "map[0] busy 97% (time accounting), 99% (samples)",
        "src is HIGH (0.80, out pool 100%) and feeds map through a rebalance exchange",
        "map is OK (0.00): not backpressured itself",
        "map handles ~1,026 records/s per subtask at 100% busy (records in / busy)",
        "its inputs would offer ~3,000 records/s (the sources' records out plus the growth of "
        "their pendingRecords, carried along the graph)",
    ]
    # 4 = ceil(3,000 / (1,026 x 0.9)); 3,000 / (4 x 1,026) = 73%
    assert "4 subtasks instead of 1 would take the ~3,000 records/s offered at 73% utilisation" in (
        (report.root_causes or ())[0].recommendation
    )


def test_a_hot_key_reads_as_it_always_has() -> None:
    # agg[0] receives 900 of 1,500 records/s (60%, fair 1/3); 900 / 300 = 3.0x; busy by time
    # 0.98 - 0.05 = 0.93 per 900 records = 1.03 ms, the others (0.25 + 0.15) / 600 = 0.67 ms
    _, lines = _one_cause(
        observation(
            vertex("src", sub(0, bp=0.8, busy=0.05), sub(1, bp=0.7, busy=0.05)),
            vertex(
                "agg",
                sub(0, busy=0.98, rin=900, drift=0.1),
                sub(1, busy=0.30, rin=300, drift=0.1),
                sub(2, busy=0.20, rin=300, drift=0.1),
                inputs=[edge("src", "hash")],
            ),
            vertex("sink", sub(0, busy=0.05, rin=1500), inputs=[edge("agg")], kind="sink"),
        )
    )
    assert lines[:3] == [
        "agg[0] receives 60% of the records of agg (fair share 33%)",
        "3.0x the records per subtask of the others, at the same time per record "
        "(1.03 ms against 0.67 ms)",
        "agg[0] is busy 93%, the others 15% to 25%",
    ]


def test_a_network_cause_reads_as_it_always_has() -> None:
    # map idle by time: 1 - (0.1 - 0.1 / 2) = 0.95; in pool 0.05; src 90% of samples blocked
    _, lines = _one_cause(
        observation(
            vertex("src", sub(0, bp=0.9, busy=0.05, rout=100, out_pool=1.0, tm=0)),
            vertex(
                "map",
                sub(0, busy=0.1, rin=100, in_pool=0.05, tm=1, drift=0.1),
                inputs=[edge("src")],
            ),
        )
    )
    assert lines[:2] == [
        "map idles 95% waiting for input",
        "map input buffers at most 5% used (in pool): data does not arrive although its "
        "producers are blocked",
    ]


def test_a_line_is_its_words_and_figures_in_order() -> None:
    built = line(subtasks("enrich", [0, 2]), " are busy ", percent("busy", 0.945, "enrich", [0, 2]))
    assert built.text == "enrich[0,2] are busy 94%"  # 0.945 is the table's 0.94
    assert [(f.what, f.value, f.subtasks) for f in built.figures] == [
        ("subtask", 0.0, (0,)),
        ("subtask", 2.0, (2,)),
        ("busy", 0.945, (0, 2)),
    ]
    assert str(built) == built.text


def test_a_number_written_as_words_is_caught() -> None:
    assert number_problems(line("enrich[0] is busy 95%"), ["enrich"])
    assert number_problems(line("map2 is busy ", percent("busy", 0.95, "map2")), ["map2"]) == []
    assert number_problems(line("busy at 100% busy (records in / busy)"), []) == []


def test_the_json_carries_the_text_and_reads_back_without_figures() -> None:
    report, lines = _one_cause(
        observation(
            vertex("src", sub(0, bp=0.8, busy=0.03, rout=1000, out_pool=1.0)),
            vertex("map", sub(0, busy=0.95, rin=1000, rout=1000), inputs=[edge("src")]),
        )
    )
    doc = json.loads(report_to_json(report))
    assert doc["root_causes"][0]["evidence"] == lines  # a list of strings, as the spec says
    again = report_from_json(report_to_json(report))
    assert again.root_causes == report.root_causes  # lines compare by their text
    (cause,) = again.root_causes or ()
    assert all(e.figures == () and isinstance(e, EvidenceLine) for e in cause.evidence)
    assert any(isinstance(p, EvidenceFigure) for e in (report.root_causes or ())[0].evidence
               for p in e.parts)  # fmt: skip
