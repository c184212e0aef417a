"""The report's JSON follows spec/report.md exactly, round-trips, and rejects bad documents."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from bpmon.model.errors import HistoryError
from bpmon.model.evidence import EvidenceLine
from bpmon.model.report_json import (
    report_from_dict,
    report_from_json,
    report_to_dict,
    report_to_json,
)
from bpmon.model.values import (
    CAUSE_KINDS,
    ChainShare,
    ChannelWindow,
    Edge,
    Finding,
    Metrics,
    NextInSeries,
    Report,
    RootCause,
    SubtaskStatus,
    VertexStatus,
    Window,
)

START = datetime(2026, 11, 22, 10, 15, 2, tzinfo=UTC)
END = datetime(2026, 11, 22, 10, 15, 7, 10_000, tzinfo=UTC)


def realistic_report() -> Report:
    """Three vertices, a skewed one with four subtasks, two causes, a finding, missing metrics."""
    enrich = tuple(
        SubtaskStatus(
            index=i,
            level="OK",
            ratio=0.0,
            metrics=Metrics(
                busy_ratio=0.99 if i == 0 else 0.3,
                idle_ratio=0.0 if i == 0 else 0.7,
                out_pool_usage=0.1,
                in_pool_usage=1.0 if i == 0 else 0.2,
                records_in_per_s=2434.0 if i == 0 else 520.5,
                records_out_per_s=2434.0 if i == 0 else 520.5,
                backpressured_time_ratio=0.0,
            ),
            disagreement=i == 3,
        )
        for i in range(4)
    )
    return Report(
        run_id="20261122T101500Z-slow-enrich-3f9a",
        job="slow-enrich",
        source="runtime",
        window=Window(START, END, 97, 51.5, 0.8, planned_samples=100, planned_interval_ms=50.0),
        vertices=(
            VertexStatus(
                name="source",
                parallelism=2,
                level="HIGH",
                ratio=0.97,
                metrics=Metrics(
                    busy_ratio=0.02,
                    idle_ratio=0.0,
                    out_pool_usage=1.0,
                    records_in_per_s=0.0,
                    records_out_per_s=3990.0,
                ),
                subtasks=(
                    SubtaskStatus(
                        0, "HIGH", 0.98, Metrics(0.02, 0.0, 0.97, 1.0, None, 0.0, 2001.0)
                    ),
                    SubtaskStatus(
                        1, "HIGH", 0.96, Metrics(0.02, 0.0, None, 1.0, None, 0.0, 1989.0)
                    ),
                ),
            ),
            VertexStatus(
                name="enrich",
                parallelism=4,
                level="OK",
                ratio=0.0,
                metrics=Metrics(
                    busy_ratio=0.99,
                    idle_ratio=0.0,
                    out_pool_usage=0.1,
                    in_pool_usage=1.0,
                    records_in_per_s=3990.0,
                    records_out_per_s=3990.0,
                ),
                inputs=(Edge("source", "hash", "pipelined"),),
                subtasks=enrich,
            ),
            VertexStatus(
                name="sink",
                parallelism=1,
                level="LOW",
                ratio=0.2,
                inputs=(Edge("enrich"),),
                subtasks=(SubtaskStatus(0, "LOW", 0.2),),
            ),
        ),
        root_causes=(
            RootCause(
                "enrich",
                "data-skew",
                (0,),
                0.92,
                (
                    EvidenceLine.of_text("enrich[0] receives 61% of the records"),
                    EvidenceLine.of_text("enrich[0] busy 99%, others idle 70%"),
                ),
                "Spread the hot key: salt it or pre-aggregate before the hash exchange.",
                capacity_per_subtask=2458.6,
                offered_rate=5000.0,
                recommended_parallelism=7,
                next_in_series=(NextInSeries("sink", 1, 3100.5, 5000.0, 2),),
            ),
            RootCause(
                "sink",
                "slow-sink",
                (),
                0.4,
                (EvidenceLine.of_text("sink busy 30%"),),
                "Scale the sink.",
            ),
        ),
        findings=(Finding("head-of-line", "sink", "shares a TCP connection with enrich"),),
    )


def small_report() -> Report:
    """A one-vertex report, small enough to write its JSON out by hand below."""
    return Report(
        run_id="r1",
        job="j",
        source="pyspy",
        window=Window(START, END, samples=100, interval_ms=50.0, jitter_ms_p99=None),
        vertices=(
            VertexStatus(
                "map",
                1,
                "LOW",
                0.25,
                Metrics(0.5, 0.25, None, 0.75, None, 10.0, 9.5),
                (Edge("src", "rebalance", "blocking"),),
                (
                    SubtaskStatus(
                        0, "LOW", 0.25, Metrics(0.5, 0.25, 0.3, 0.75, None, 10.0, 9.5), True
                    ),
                ),
            ),
        ),
        root_causes=(
            RootCause(
                "map", "slow-operator", (0,), 0.8, (EvidenceLine.of_text("map busy"),), "Scale it."
            ),
        ),
        findings=(Finding("head-of-line", "map", "d"),),
    )


SMALL_JSON = """{
  "schema": "bpmon.report/1", "run_id": "r1", "job": "j", "source": "pyspy",
  "window": {"start": "2026-11-22T10:15:02.000Z", "end": "2026-11-22T10:15:07.010Z",
             "samples": 100, "interval_ms": 50.0, "jitter_ms_p99": null,
             "planned_samples": null, "planned_interval_ms": null},
  "vertices": [
    {"name": "map", "parallelism": 1, "level": "LOW", "ratio": 0.25,
     "busy_ratio": 0.5, "idle_ratio": 0.25, "out_pool_usage": 0.75, "in_pool_usage": null,
     "records_in_per_s": 10.0, "records_out_per_s": 9.5,
     "inputs": [{"from": "src", "partitioner": "rebalance", "exchange": "blocking"}],
     "subtasks": [
       {"index": 0, "level": "LOW", "ratio": 0.25, "busy_ratio": 0.5, "idle_ratio": 0.25,
        "out_pool_usage": 0.75, "in_pool_usage": null,
        "records_in_per_s": 10.0, "records_out_per_s": 9.5,
        "backpressured_time_ratio": 0.3, "disagreement": true}
     ]}
  ],
  "root_causes": [
    {"vertex": "map", "kind": "slow-operator", "subtasks": [0], "confidence": 0.8,
     "evidence": ["map busy"], "recommendation": "Scale it.",
     "capacity_per_subtask": null, "offered_rate": null, "recommended_parallelism": null}
  ],
  "findings": [{"kind": "head-of-line", "vertex": "map", "detail": "d"}],
  "levels_from": "samples",
  "checkpoints": null,
  "autoscaler": null
}"""

SPEC_EXAMPLE = """{
  "schema": "bpmon.report/1",
  "run_id": "20261122T101500Z-slow-enrich-3f9a",
  "job": "slow-enrich",
  "source": "runtime",
  "window": {"start": "2026-11-22T10:15:02.000Z", "end": "2026-11-22T10:15:07.010Z",
             "samples": 100, "interval_ms": 50, "jitter_ms_p99": 0.8},
  "vertices": [
    {"name": "source", "parallelism": 2, "level": "HIGH", "ratio": 0.97,
     "busy_ratio": 0.02, "idle_ratio": 0.0,
     "out_pool_usage": 1.0, "in_pool_usage": null,
     "records_in_per_s": 0, "records_out_per_s": 3990,
     "inputs": [],
     "subtasks": [
       {"index": 0, "level": "HIGH", "ratio": 0.98, "busy_ratio": 0.02, "idle_ratio": 0.0,
        "out_pool_usage": 1.0, "in_pool_usage": null,
        "records_in_per_s": 0, "records_out_per_s": 2001}
     ]},
    {"name": "enrich", "parallelism": 4, "level": "OK", "ratio": 0.0, "busy_ratio": 0.99,
     "idle_ratio": 0.0, "out_pool_usage": 0.1, "in_pool_usage": 1.0,
     "inputs": [{"from": "source", "partitioner": "hash", "exchange": "pipelined"}],
     "subtasks": []}
  ],
  "root_causes": [
    {"vertex": "enrich", "kind": "data-skew", "subtasks": [0], "confidence": 0.92,
     "evidence": ["enrich[0] receives 61% of the records of enrich"],
     "recommendation": "Spread the hot key: salt it, pre-aggregate before the hash exchange"}
  ],
  "findings": []
}"""


def ordered_pairs(text: str) -> Any:
    """Parse JSON keeping every object as its list of (key, value) pairs, so order counts."""
    return json.loads(text, object_pairs_hook=list)


def test_a_realistic_report_round_trips() -> None:
    report = realistic_report()
    assert report_from_json(report_to_json(report)) == report
    assert report_from_dict(report_to_dict(report)) == report


def test_the_runtime_s_channels_round_trip_and_are_left_out_when_there_are_none() -> None:
    channels = (
        ChannelWindow("src", 0, "map", 1, remote=True, backlog=9.04, queued=0.0, no_credit=0.25),
        ChannelWindow("src", 1, "map", 1, remote=False, backlog=0.5, queued=0.0, blocked=1.0),
        ChannelWindow("map", 1, "out", 0, remote=True, backlog=3.0, queued=2.0, stalled=1.0),
    )
    report = replace(realistic_report(), channels=channels)
    doc = report_to_dict(report)
    assert list(doc)[-1] == "channels" and doc["channels"][0]["backlog"] == 9.0  # one decimal
    again = report_from_json(report_to_json(report))
    assert again.channels[1:] == channels[1:]
    assert again.channels[0] == replace(channels[0], backlog=9.0)
    assert "channels" not in report_to_dict(realistic_report())


def test_a_chain_share_round_trips_and_is_left_out_when_absent() -> None:
    share = ChainShare("enrich", 1, 80, 100, (("parse", 0.15), ("enrich", 0.8), ("check", 0.05)))
    report = realistic_report()
    causes = report.root_causes or ()
    report = replace(report, root_causes=(replace(causes[0], in_chain=share), *causes[1:]))
    doc = report_to_dict(report)
    assert doc["root_causes"][0]["in_chain"] == {
        "operator": "enrich",
        "position": 1,
        "samples": 80,
        "busy_samples": 100,
        "shares": [
            {"operator": "parse", "share": 0.15},
            {"operator": "enrich", "share": 0.8},
            {"operator": "check", "share": 0.05},
        ],
    }
    assert "in_chain" not in doc["root_causes"][1]
    assert report_from_json(report_to_json(report)) == report


def test_keys_values_and_their_order_are_those_of_the_spec() -> None:
    assert ordered_pairs(report_to_json(small_report())) == ordered_pairs(SMALL_JSON)


def test_the_top_level_keys_come_in_spec_order() -> None:
    keys = list(report_to_dict(realistic_report()))
    expected = ["schema", "run_id", "job", "source", "window", "vertices", "root_causes"]
    # added keys come after the spec's; checkpoints and autoscaler are null when not observed
    assert keys == [*expected, "findings", "levels_from", "checkpoints", "autoscaler"]


def test_the_spec_example_reads() -> None:
    report = report_from_json(SPEC_EXAMPLE)
    source, enrich = report.vertices
    assert (source.level, source.ratio, source.metrics.records_out_per_s) == ("HIGH", 0.97, 3990.0)
    assert source.subtasks[0].metrics.in_pool_usage is None
    assert (enrich.metrics.records_in_per_s, enrich.metrics.records_out_per_s) == (None, None)
    assert enrich.inputs == (Edge("source", "hash", "pipelined"),)
    assert report.window.interval_ms == 50.0
    assert report.window.end == END
    assert report.root_causes is not None
    assert report.root_causes[0].kind == "data-skew"
    assert report.root_causes[0].subtasks == (0,)


def undiagnosed() -> Report:
    """The realistic report before the rules engine ran: no levels, ratios or root causes."""
    r = realistic_report()
    vertices = tuple(
        VertexStatus(
            v.name,
            v.parallelism,
            metrics=Metrics(busy_ratio=v.metrics.busy_ratio),
            inputs=v.inputs,
            subtasks=tuple(
                SubtaskStatus(s.index, metrics=Metrics(busy_ratio=s.metrics.busy_ratio))
                for s in v.subtasks
            ),
        )
        for v in r.vertices
    )
    return Report(r.run_id, r.job, r.source, r.window, vertices, root_causes=None)


def test_no_diagnosis_leaves_out_level_ratio_and_root_causes() -> None:
    doc = json.loads(report_to_json(undiagnosed()))
    assert "root_causes" not in doc
    source = doc["vertices"][0]
    assert "level" not in source
    assert "ratio" not in source
    assert "level" not in source["subtasks"][0]
    assert "ratio" not in source["subtasks"][0]
    assert source["busy_ratio"] == 0.02
    assert source["in_pool_usage"] is None  # a metric the source lacks is null, not left out
    assert report_from_json(report_to_json(undiagnosed())) == undiagnosed()


def test_an_empty_diagnosis_is_an_empty_list() -> None:
    r = realistic_report()
    empty = Report(r.run_id, r.job, r.source, r.window, r.vertices, root_causes=())
    assert json.loads(report_to_json(empty))["root_causes"] == []
    assert report_from_json(report_to_json(empty)).root_causes == ()


def test_nan_and_infinities_are_written_as_null() -> None:
    r = small_report()
    odd = VertexStatus("map", 1, "HIGH", math.nan, Metrics(math.inf, -math.inf, None, math.nan))
    cause = RootCause("map", "spilling", confidence=math.nan)
    report = Report(r.run_id, r.job, r.source, r.window, (odd,), (cause,))
    text = report_to_json(report)
    assert "NaN" not in text
    assert "Infinity" not in text
    doc = json.loads(text)
    vertex = doc["vertices"][0]
    assert [vertex[k] for k in ("ratio", "busy_ratio", "idle_ratio", "out_pool_usage")] == [
        None
    ] * 4
    assert doc["root_causes"][0]["confidence"] is None
    back = report_from_json(text)
    assert back.root_causes is not None
    assert math.isnan(back.root_causes[0].confidence)


def test_numbers_are_rounded_ratios_to_three_decimals_rates_to_one() -> None:
    r = small_report()
    v = VertexStatus(
        "map", 1, "LOW", 0.123456, Metrics(0.98765, None, None, 1.0004, None, 1234.5678, 0.04)
    )
    doc = report_to_dict(Report(r.run_id, r.job, r.source, r.window, (v,), ()))
    vertex = doc["vertices"][0]
    assert (vertex["ratio"], vertex["busy_ratio"], vertex["out_pool_usage"]) == (
        0.123,
        0.988,
        1.0,
    )
    assert (vertex["records_in_per_s"], vertex["records_out_per_s"]) == (1234.6, 0.0)


def test_timestamps_are_utc_with_milliseconds() -> None:
    r = small_report()
    paris = timezone(timedelta(hours=1))
    window = Window(
        datetime(2026, 11, 22, 11, 15, 2, 123_456, tzinfo=paris),
        datetime(2026, 11, 22, 10, 15, 7),  # naive: taken as UTC
        samples=100,
        interval_ms=50.0,
    )
    doc = report_to_dict(Report(r.run_id, r.job, r.source, window, ()))
    assert doc["window"]["start"] == "2026-11-22T10:15:02.123Z"
    assert doc["window"]["end"] == "2026-11-22T10:15:07.000Z"
    assert report_from_dict(doc).window.start == datetime(
        2026, 11, 22, 10, 15, 2, 123_000, tzinfo=UTC
    )


def test_unknown_keys_are_ignored() -> None:
    doc = json.loads(SMALL_JSON)
    doc["added_in_1_1"] = {"anything": [1, 2]}
    doc["vertices"][0]["kind"] = "map"
    doc["vertices"][0]["subtasks"][0]["thread"] = "map (1/1)"
    doc["schema"] = "bpmon.report/1.1"
    report = report_from_dict(doc)
    assert report.vertices[0].subtasks[0].disagreement is True
    assert report.schema == "bpmon.report/1.1"


@pytest.mark.parametrize(
    ("schema", "named"),
    [("bpmon.report/2", "bpmon.report/2"), ("other.report/1", "other.report/1"), ("", '""')],
)
def test_another_schema_is_rejected(schema: str, named: str) -> None:
    doc = json.loads(SMALL_JSON)
    doc["schema"] = schema
    with pytest.raises(HistoryError, match="schema") as caught:
        report_from_dict(doc)
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


REPORT_DOC = Path(__file__).parents[2] / "docs" / "report.md"


def _documented_cause_kinds() -> set[str]:
    """The kinds in docs/report.md's "Root cause kinds" table."""
    text = REPORT_DOC.read_text(encoding="utf-8").split("### Root cause kinds", 1)[1]
    table = text.split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z-]+)` \|", table, flags=re.MULTILINE))


def test_the_report_reads_every_documented_cause_kind_and_the_diagnosis_has_no_other() -> None:
    documented = _documented_cause_kinds()
    assert documented == set(CAUSE_KINDS)
    for kind in sorted(documented):
        doc = json.loads(SMALL_JSON)
        doc["root_causes"][0]["kind"] = kind
        assert report_from_dict(doc).root_causes[0].kind == kind


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set ``value`` at a dotted path like ``vertices.0.parallelism`` (``...`` deletes it)."""
    *parents, last = path.split(".")
    target: Any = doc
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is ...:
        del target[last]
    elif last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("vertices.0.parallelism", "two", 'vertices[0].parallelism = "two"'),
        ("vertices.0.level", "MEDIUM", 'vertices[0].level = "MEDIUM"'),
        ("vertices.0.subtasks.0.index", True, "vertices[0].subtasks[0].index = true"),
        ("vertices.0.busy_ratio", "0.5", 'vertices[0].busy_ratio = "0.5"'),
        ("vertices.0.inputs.0", "src", 'vertices[0].inputs[0] = "src"'),
        ("vertices", {}, "vertices = {}"),
        ("window.start", "yesterday", 'window.start = "yesterday"'),
        ("window.samples", 1.5, "window.samples = 1.5"),
        ("source", "kafka", 'source = "kafka"'),
        ("root_causes.0.kind", "gremlins", 'root_causes[0].kind = "gremlins"'),
        ("root_causes.0.subtasks", ["0"], 'root_causes[0].subtasks[0] = "0"'),
        ("findings.0.detail", None, "findings[0].detail = null"),
        ("run_id", ..., "run_id is missing"),
        ("window", ..., "window is missing"),
        ("vertices.0.name", ..., "vertices[0].name is missing"),
    ],
)
def test_a_malformed_report_names_the_field_and_value(path: str, value: Any, named: str) -> None:
    doc = json.loads(SMALL_JSON)
    _set(doc, path, value)
    with pytest.raises(HistoryError) as caught:
        report_from_dict(doc)
    message = str(caught.value)
    assert named in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", '"report"', "null"])
def test_text_that_is_not_a_report_object_is_rejected(text: str) -> None:
    with pytest.raises(HistoryError) as caught:
        report_from_json(text)
    assert "\n" not in str(caught.value)


def test_written_json_is_strict_and_plain_utf8() -> None:
    r = small_report()
    named = Report(r.run_id, "jöb", r.source, r.window, r.vertices, r.root_causes)
    text = report_to_json(named)
    assert '"job": "jöb"' in text
    assert json.loads(text)["job"] == "jöb"
