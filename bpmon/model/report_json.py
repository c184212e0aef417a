"""The report as JSON (``docs/report.md``): writing it and reading it back.

The key names and their order follow the spec exactly; fields the model has beyond the spec
(``backpressured_time_ratio``, ``disagreement``) are added keys, never renamed ones. ``level``,
``ratio`` and ``root_causes`` that are ``None`` mean "no diagnosis yet" and are left out; any other
``None`` is written as ``null``. NaN and infinities are never written (``null`` instead), and a
``null`` read back into a field that cannot be ``None`` becomes NaN, so a round trip is faithful.

Reading is forward compatible (unknown keys are ignored) and strict about everything else: a
report of another major ``schema`` version, or a malformed one, raises :class:`HistoryError` with
one line naming the field and its value. Stdlib only: this module belongs to the model layer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast, get_args

from bpmon.model.autoscaler_json import autoscaler_from, autoscaler_to_dict
from bpmon.model.checkpoint_json import (
    checkpoint_change_to_dict,
    checkpoints_from,
    checkpoints_to_dict,
)
from bpmon.model.checkpoints import checkpoint_change
from bpmon.model.clock import as_utc, format_timestamp
from bpmon.model.errors import HistoryError
from bpmon.model.evidence import EvidenceLine
from bpmon.model.json_fields import Fields, bad, typed
from bpmon.model.numbers import rounded
from bpmon.model.values import (
    CAUSE_KINDS,
    REPORT_SCHEMA,
    ChainShare,
    ChannelWindow,
    Edge,
    Finding,
    FindingKind,
    Level,
    LevelsFrom,
    Metrics,
    NextInSeries,
    Report,
    RootCause,
    Source,
    SubtaskStatus,
    VertexStatus,
    Window,
)

SCHEMA_NAME, _, _MAJOR = REPORT_SCHEMA.partition("/")
SCHEMA_MAJOR = int(_MAJOR)
"""The major version of ``bpmon.report`` this module reads; minor versions only add fields."""

LEVELS: tuple[Level, ...] = get_args(Level)
SOURCES: tuple[Source, ...] = get_args(Source)
LEVELS_FROM: tuple[LevelsFrom, ...] = get_args(LevelsFrom)

_RATIO_DIGITS = 3
_RATE_DIGITS = 1
_MS_DIGITS = 3
_METRICS: tuple[tuple[str, int], ...] = (
    ("busy_ratio", _RATIO_DIGITS),
    ("idle_ratio", _RATIO_DIGITS),
    ("out_pool_usage", _RATIO_DIGITS),
    ("in_pool_usage", _RATIO_DIGITS),
    ("records_in_per_s", _RATE_DIGITS),
    ("records_out_per_s", _RATE_DIGITS),
)
"""The metric fields shared by vertices and subtasks, in spec order, with their rounding."""


# --------------------------------------------------------------------------------------- writing


def report_to_dict(report: Report) -> dict[str, Any]:
    """The report as a JSON-ready dict, keys in the order of ``docs/report.md``."""
    doc: dict[str, Any] = {
        "schema": report.schema,
        "run_id": report.run_id,
        "job": report.job,
        "source": report.source,
        "window": _window_to_dict(report.window),
        "vertices": [_vertex_to_dict(v) for v in report.vertices],
    }
    if report.root_causes is not None:
        doc["root_causes"] = [root_cause_to_dict(c) for c in report.root_causes]
    doc["findings"] = [
        {"kind": f.kind, "vertex": f.vertex, "detail": f.detail} for f in report.findings
    ]
    doc["levels_from"] = report.levels_from
    doc["checkpoints"] = (
        None if report.checkpoints is None else checkpoints_to_dict(report.checkpoints)
    )
    doc["autoscaler"] = None if report.autoscaler is None else autoscaler_to_dict(report.autoscaler)
    if report.channels:
        doc["channels"] = [_channel_to_dict(c) for c in report.channels]
    return doc


def _channel_to_dict(c: ChannelWindow) -> dict[str, Any]:
    return {
        "producer": c.producer,
        "producer_index": c.producer_index,
        "consumer": c.consumer,
        "consumer_index": c.consumer_index,
        "remote": c.remote,
        "backlog": rounded(c.backlog, _RATE_DIGITS),
        "queued": rounded(c.queued, _RATE_DIGITS),
        "no_credit": rounded(c.no_credit, _RATIO_DIGITS),
        "stalled": rounded(c.stalled, _RATIO_DIGITS),
        "blocked": rounded(c.blocked, _RATIO_DIGITS),
    }


def report_to_json(report: Report, indent: int | None = 2) -> str:
    """The report as JSON text (strict JSON: never NaN or Infinity)."""
    return json_text(report_to_dict(report), indent)


def reports_to_json(reports: Sequence[Report], indent: int | None = 2) -> str:
    """One report as its document, several as an array of them (``bpmon run --bursts N``)."""
    if len(reports) == 1:
        return report_to_json(reports[0], indent)
    return json_text([report_to_dict(r) for r in reports], indent)


def comparison_to_json(
    before: Report,
    after: Report,
    changes: Sequence[str],
    removed: bool,
    indent: int | None = 2,
    at_edge: Sequence[str] = (),
) -> str:
    """``bpmon whatif --json`` / ``run --verify --json``: :func:`comparison_to_dict` as text."""
    return json_text(comparison_to_dict(before, after, changes, removed, at_edge), indent)


def comparison_to_dict(
    before: Report,
    after: Report,
    changes: Sequence[str],
    removed: bool,
    at_edge: Sequence[str] = (),
) -> dict[str, Any]:
    """Both reports, the change, the verdict (``at_edge``: changed vertices still saturated
    although the backpressure is gone) and the newest checkpoint of each run side by side
    (``checkpoints``: null when neither took any)."""
    change = checkpoint_change(before.checkpoints, after.checkpoints)
    return {
        "changes": list(changes),
        "backpressure_removed": removed,
        "at_edge": list(at_edge),
        "checkpoints": None if change is None else checkpoint_change_to_dict(change),
        "before": report_to_dict(before),
        "after": report_to_dict(after),
    }


def json_text(doc: object, indent: int | None = 2) -> str:
    """The one way bpmon writes JSON: UTF-8 text, strict (a NaN is a bug, never written)."""
    return json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False)


def _window_to_dict(window: Window) -> dict[str, Any]:
    return {
        "start": format_timestamp(window.start),
        "end": format_timestamp(window.end),
        "samples": window.samples,
        "interval_ms": rounded(window.interval_ms, _MS_DIGITS),
        "jitter_ms_p99": rounded(window.jitter_ms_p99, _MS_DIGITS),
        "planned_samples": window.planned_samples,
        "planned_interval_ms": rounded(window.planned_interval_ms, _MS_DIGITS),
    }


def _status_to_dict(status: VertexStatus | SubtaskStatus, head: dict[str, Any]) -> dict[str, Any]:
    """``head`` followed by level, ratio (when diagnosed) and the metric fields."""
    if status.level is not None:
        head["level"] = status.level
    if status.ratio is not None:
        head["ratio"] = rounded(status.ratio, _RATIO_DIGITS)
    for name, digits in _METRICS:
        head[name] = rounded(getattr(status.metrics, name), digits)
    return head


def _vertex_to_dict(vertex: VertexStatus) -> dict[str, Any]:
    doc = _status_to_dict(vertex, {"name": vertex.name, "parallelism": vertex.parallelism})
    doc["inputs"] = [
        {"from": e.source, "partitioner": e.partitioner, "exchange": e.exchange}
        for e in vertex.inputs
    ]
    doc["subtasks"] = [_subtask_to_dict(s) for s in vertex.subtasks]
    return doc


def _subtask_to_dict(subtask: SubtaskStatus) -> dict[str, Any]:
    doc = _status_to_dict(subtask, {"index": subtask.index})
    doc["backpressured_time_ratio"] = rounded(
        subtask.metrics.backpressured_time_ratio, _RATIO_DIGITS
    )
    doc["disagreement"] = subtask.disagreement
    return doc


def root_cause_to_dict(cause: RootCause) -> dict[str, Any]:
    """One root cause as the report's JSON writes it (``docs/report.md``)."""
    doc: dict[str, Any] = {
        "vertex": cause.vertex,
        "kind": cause.kind,
        "subtasks": list(cause.subtasks),
        "confidence": rounded(cause.confidence, _RATIO_DIGITS),
        "evidence": [line.text for line in cause.evidence],
        "recommendation": cause.recommendation,
        "capacity_per_subtask": rounded(cause.capacity_per_subtask, _RATE_DIGITS),
        "offered_rate": rounded(cause.offered_rate, _RATE_DIGITS),
        "recommended_parallelism": cause.recommended_parallelism,
    }
    if cause.next_in_series:  # left out when empty, like channels
        doc["next_in_series"] = [
            {
                "vertex": n.vertex,
                "parallelism": n.parallelism,
                "capacity_per_subtask": rounded(n.capacity_per_subtask, _RATE_DIGITS),
                "offered_rate": rounded(n.offered_rate, _RATE_DIGITS),
                "recommended_parallelism": n.recommended_parallelism,
            }
            for n in cause.next_in_series
        ]
    if cause.in_chain is not None:  # left out when absent
        doc["in_chain"] = _chain_to_dict(cause.in_chain)
    if cause.backlog_records is not None:  # left out where no source reports pendingRecords
        doc["backlog_records"] = rounded(cause.backlog_records, _RATE_DIGITS)
        doc["catch_up_rate"] = rounded(cause.catch_up_rate, _RATE_DIGITS)
    return doc


def _chain_to_dict(share: ChainShare) -> dict[str, Any]:
    return {
        "operator": share.operator,
        "position": share.position,
        "samples": share.samples,
        "busy_samples": share.busy_samples,
        "shares": [
            {"operator": name, "share": rounded(value, _RATIO_DIGITS)}
            for name, value in share.shares
        ],
    }


# --------------------------------------------------------------------------------------- reading


def report_from_json(text: str) -> Report:
    """Parse a report; HistoryError (one line) if it is not JSON or not a valid report."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        joined = " " if exc.msg.endswith(" at") else " at "  # "Unterminated string starting at"
        raise HistoryError(
            f"report is not valid JSON: {exc.msg}{joined}line {exc.lineno} column {exc.colno}"
        ) from None
    return report_from_dict(doc)


def report_from_dict(doc: object) -> Report:
    """Build a report from a parsed JSON document; HistoryError names a bad field and value."""
    top = Fields(doc, "report")
    _check_schema(top.get("schema", str))
    causes = top.optional("root_causes", list)
    return Report(
        schema=top.get("schema", str),
        run_id=top.get("run_id", str),
        job=top.get("job", str),
        source=top.choice("source", SOURCES),
        levels_from=top.choice("levels_from", LEVELS_FROM)
        if "levels_from" in top.doc
        else "samples",
        window=_window_from(top.child("window")),
        vertices=tuple(_vertex_from(f) for f in top.children("vertices")),
        root_causes=None
        if causes is None
        else tuple(_cause_from(f) for f in top.children("root_causes")),
        findings=tuple(
            Finding(
                kind=cast(FindingKind, f.get("kind", str)),
                vertex=f.get("vertex", str),
                detail=f.get("detail", str),
            )
            for f in top.children("findings", required=False)
        ),
        channels=tuple(_channel_from(f) for f in top.children("channels", required=False)),
        checkpoints=checkpoints_from(top.child("checkpoints")) if top.has("checkpoints") else None,
        autoscaler=autoscaler_from(top.child("autoscaler")) if top.has("autoscaler") else None,
    )


def _channel_from(f: Fields) -> ChannelWindow:
    return ChannelWindow(
        producer=f.get("producer", str),
        producer_index=f.get("producer_index", int),
        consumer=f.get("consumer", str),
        consumer_index=f.get("consumer_index", int),
        remote=f.get("remote", bool),
        backlog=f.number("backlog"),
        queued=f.number("queued"),
        no_credit=f.optional_number("no_credit"),
        stalled=f.optional_number("stalled"),
        blocked=f.number("blocked"),
    )


def parse_timestamp(text: str, field: str = "timestamp") -> datetime:
    """Read an ISO 8601 timestamp as an aware UTC datetime (naive ones are taken as UTC)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise bad(field, text, "expected a UTC timestamp like 2026-11-22T10:15:02.000Z") from None
    return as_utc(moment)


def _check_schema(schema: str) -> None:
    name, _, version = schema.partition("/")
    major = version.partition(".")[0]
    if name != SCHEMA_NAME or not major.isdigit():
        raise bad("schema", schema, f'expected "{REPORT_SCHEMA}"')
    if int(major) != SCHEMA_MAJOR:
        raise HistoryError(
            f"report schema = {schema!r}: this bpmon reads {REPORT_SCHEMA} only; "
            "use the bpmon version that wrote it"
        )


def _window_from(f: Fields) -> Window:
    return Window(
        start=parse_timestamp(f.get("start", str), f.path("start")),
        end=parse_timestamp(f.get("end", str), f.path("end")),
        samples=f.get("samples", int),
        interval_ms=f.number("interval_ms"),
        jitter_ms_p99=f.optional_number("jitter_ms_p99"),
        planned_samples=f.optional("planned_samples", int),
        planned_interval_ms=f.optional_number("planned_interval_ms"),
    )


def _metrics_from(f: Fields) -> dict[str, Any]:
    """level, ratio and the metrics, as keyword arguments of a status dataclass."""
    values: dict[str, Any] = {name: f.optional_number(name) for name, _ in _METRICS}
    values["backpressured_time_ratio"] = f.optional_number("backpressured_time_ratio")
    return {
        "level": f.optional_choice("level", LEVELS),
        "ratio": f.optional_number("ratio"),
        "metrics": Metrics(**values),
    }


def _vertex_from(f: Fields) -> VertexStatus:
    return VertexStatus(
        name=f.get("name", str),
        parallelism=f.get("parallelism", int),
        inputs=tuple(
            Edge(
                source=e.get("from", str),
                partitioner=e.get("partitioner", str, "forward"),
                exchange=e.get("exchange", str, "pipelined"),
            )
            for e in f.children("inputs", required=False)
        ),
        subtasks=tuple(_subtask_from(s) for s in f.children("subtasks", required=False)),
        **_metrics_from(f),
    )


def _subtask_from(f: Fields) -> SubtaskStatus:
    return SubtaskStatus(
        index=f.get("index", int),
        disagreement=f.get("disagreement", bool, False),
        **_metrics_from(f),
    )


def root_cause_from_dict(doc: object, where: str = "root_cause") -> RootCause:
    """One root cause from its JSON object; HistoryError names a bad field and value."""
    return _cause_from(Fields(doc, where))


def _cause_from(f: Fields) -> RootCause:
    subtasks = f.get("subtasks", list, [])
    return RootCause(
        vertex=f.get("vertex", str),
        kind=f.choice("kind", CAUSE_KINDS),
        subtasks=tuple(typed(i, int, f"{f.path('subtasks')}[{n}]") for n, i in enumerate(subtasks)),
        confidence=f.number("confidence", 0.0),
        evidence=tuple(  # the text alone: the JSON carries no figures
            EvidenceLine.of_text(typed(e, str, f"{f.path('evidence')}[{n}]"))
            for n, e in enumerate(f.get("evidence", list, []))
        ),
        recommendation=f.get("recommendation", str, ""),
        capacity_per_subtask=f.optional_number("capacity_per_subtask"),
        offered_rate=f.optional_number("offered_rate"),
        recommended_parallelism=f.optional("recommended_parallelism", int),
        next_in_series=tuple(
            NextInSeries(
                vertex=n.get("vertex", str),
                parallelism=n.get("parallelism", int),
                capacity_per_subtask=n.number("capacity_per_subtask"),
                offered_rate=n.number("offered_rate"),
                recommended_parallelism=n.get("recommended_parallelism", int),
            )
            for n in f.children("next_in_series", required=False)
        ),
        in_chain=_chain_from(f.child("in_chain")) if f.has("in_chain") else None,
        backlog_records=f.optional_number("backlog_records"),
        catch_up_rate=f.optional_number("catch_up_rate"),
    )


def _chain_from(f: Fields) -> ChainShare:
    return ChainShare(
        operator=f.get("operator", str),
        position=f.get("position", int),
        samples=f.get("samples", int),
        busy_samples=f.get("busy_samples", int),
        shares=tuple((s.get("operator", str), s.number("share")) for s in f.children("shares")),
    )
