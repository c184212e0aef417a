"""A Flink job's checkpoints over REST, as the model's
:class:`~bpmon.model.checkpoints.CheckpointWindow`, read once per window.

Three of Flink's checkpoint statistics endpoints (field names as Flink 2.3 answers them, and as
Flink 1.20's REST reference lists them; Flink 1.13 calls the aligned timeout
``alignment_timeout``, read as 0 here):

- ``GET /jobs/{id}/checkpoints/config``: ``mode`` (``exactly_once`` or ``at_least_once``),
  ``interval``, ``timeout``, ``unaligned_checkpoints`` and ``aligned_checkpoint_timeout`` (ms).
  Read once for the watch: a job's checkpoint settings are part of its job graph, fixed for its
  life. A streaming job that does not checkpoint answers with ``interval`` 2^63 - 1 ms (Flink
  2.3: periodic checkpoints never due); a job without checkpoint statistics at all answers 404.
- ``GET /jobs/{id}/checkpoints``: ``counts`` (``completed``, ``failed``; a trigger refused
  before it started, as while tasks deploy, is counted failed and has no details) and ``latest``
  (``completed`` and ``failed``: ``id``, ``end_to_end_duration``, ``state_size``,
  ``persisted_data``, and a failed one's ``failure_message``). Every window.
- ``GET /jobs/{id}/checkpoints/details/{cid}/subtasks/{vertex}``, per vertex of the job, for the
  newest completed and the newest failed checkpoint: per subtask ``status`` (``completed``, or
  ``pending_or_failed`` with nothing else), ``start_delay``, ``alignment.duration``,
  ``checkpoint.sync`` and ``checkpoint.async`` (ms), ``state_size``, ``alignment.processed``
  and ``alignment.persisted`` (bytes; persisted in-flight data is above 0 only for unaligned
  checkpoints), ``unaligned_checkpoint`` and ``aborted``. A checkpoint's details are final once it
  ended, so each is read once and kept (:class:`FlinkCheckpoints`). Flink answers -1 for a
  figure it does not know: None here.

Flink serves these from a cache refreshed every ``rest.cache.checkpoint-statistics.timeout``
(``web.refresh-interval``, 3 s, by default): the newest checkpoint a window shows may have ended
up to that long before the window did.

Anything that cannot be read (404, a 5xx after the client's retries, a document of another shape)
makes the window's checkpoints None and one ``checkpoints-unread`` finding saying what happened
and the fix, every window it lasts (each report stands alone); never an error of the window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bpmon.collectors.flink.plan import FlinkGraph
from bpmon.collectors.flink.rest import Cost, FlinkRest, NotFoundError
from bpmon.model.checkpoints import (
    Checkpoint,
    CheckpointMode,
    CheckpointStatus,
    CheckpointWindow,
    SubtaskCheckpoint,
    VertexCheckpoint,
)
from bpmon.model.errors import BpmonError
from bpmon.model.values import Finding

NEVER_MS = 2**63 - 1
"""The interval Flink gives a job that does not checkpoint (``Long.MAX_VALUE`` ms)."""

ENABLE = (
    "enable it (execution.checkpointing.interval, or env.enableCheckpointing(ms)) for bpmon to "
    "show its checkpoints under backpressure"
)
"""The fix a ``checkpoints-unread`` finding names when checkpointing is off."""


class _UnreadError(Exception):
    """The checkpoints cannot be read this window; the message is the finding's detail."""


class _OffError(_UnreadError):
    """Flink keeps no checkpoint statistics for the job (404): checkpointing is off."""


class ShapeError(Exception):
    """A document is not of the shape Flink answers; the message names the request and field."""


@dataclass(frozen=True, slots=True)
class CheckpointConfig:
    """A job's checkpoint settings (``GET /jobs/{id}/checkpoints/config``).

    ``interval_ms`` None: the job does not checkpoint. ``mode`` is how barriers travel:
    ``at_least_once`` barriers are not aligned, but still queue behind the data, as aligned ones.
    """

    mode: CheckpointMode
    interval_ms: float | None
    timeout_ms: float | None
    aligned_timeout_ms: float


@dataclass(frozen=True, slots=True)
class Ended:
    """The newest completed or failed checkpoint as ``GET /jobs/{id}/checkpoints`` sums it up."""

    id: int
    status: CheckpointStatus
    duration_ms: float
    state_bytes: int
    persisted_bytes: int
    failure: str | None = None


class _Doc:
    """A JSON document read field by field: a field missing or of another type is
    :class:`ShapeError`, naming the request and the field."""

    def __init__(self, value: Any, request: str, where: str = "") -> None:
        self.value, self.request, self.where = value, request, where

    def wrong(self, key: str, wanted: str) -> ShapeError:
        """The error of ``key`` not being ``wanted``."""
        field = f"{self.where}.{key}" if self.where else key
        shown = _shown(self._get(key))
        return ShapeError(f"{self.request} answered {field} = {shown}, not {wanted}")

    def _get(self, key: str) -> Any:
        return self.value.get(key) if isinstance(self.value, dict) else None

    def obj(self, key: str) -> _Doc:
        """The object at ``key``."""
        found = self.optional(key)
        if found is None:
            raise self.wrong(key, "an object")
        return found

    def optional(self, key: str) -> _Doc | None:
        """The object at ``key``, None when it is null or absent."""
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.wrong(key, "an object or null")
        return _Doc(value, self.request, f"{self.where}.{key}" if self.where else key)

    def items(self, key: str) -> list[_Doc]:
        """The objects of the array at ``key``."""
        value = self._get(key)
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.wrong(key, "an array of objects")
        return [_Doc(v, self.request, f"{self.where}.{key}[{i}]") for i, v in enumerate(value)]

    def whole(self, key: str) -> int:
        """An integer (a whole float too: JSON does not tell them apart)."""
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.wrong(key, "an integer")
        if not math.isfinite(value) or value != int(value):
            raise self.wrong(key, "an integer")
        return int(value)

    def figure(self, key: str) -> float | None:
        """A number; None for Flink's -1 (not known), or when the key is absent."""
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.wrong(key, "a number")
        return float(value) if math.isfinite(value) and value >= 0 else None

    def count(self, key: str) -> int | None:
        """A byte count (None: not known)."""
        value = self.figure(key)
        return None if value is None else int(value)

    def flag(self, key: str, default: bool = False) -> bool:
        """A boolean (``default`` when absent)."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.wrong(key, "true or false")
        return value

    def text(self, key: str) -> str | None:
        """A string (None when absent)."""
        value = self._get(key)
        return None if value is None else str(value)


def _shown(value: Any) -> str:
    text = "missing" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def config_of(document: Any, request: str = "GET /checkpoints/config") -> CheckpointConfig:
    """The settings of ``GET /jobs/{id}/checkpoints/config``.

    Raises:
        ShapeError: not the document Flink answers.
    """
    doc = _Doc(document, request)
    if not isinstance(document, dict):
        raise ShapeError(f"{request} answered {_shown(document)}, not a JSON object")
    interval = doc.figure("interval")
    unaligned = doc.flag("unaligned_checkpoints")
    aligned_timeout = doc.figure("aligned_checkpoint_timeout") or 0.0
    if doc.text("mode") not in ("exactly_once", "at_least_once"):
        raise doc.wrong("mode", '"exactly_once" or "at_least_once"')
    return CheckpointConfig(
        mode="unaligned" if unaligned else "aligned",
        interval_ms=None if interval is None or interval <= 0 or interval >= NEVER_MS else interval,
        timeout_ms=doc.figure("timeout"),
        aligned_timeout_ms=aligned_timeout if unaligned else 0.0,
    )


def counts_of(document: Any, request: str = "GET /checkpoints") -> tuple[int, int]:
    """Checkpoints completed and failed since the job started (``counts``)."""
    if not isinstance(document, dict):
        raise ShapeError(f"{request} answered {_shown(document)}, not a JSON object")
    counts = _Doc(document, request).obj("counts")
    return counts.whole("completed"), counts.whole("failed")


def latest_of(
    document: Any, request: str = "GET /checkpoints"
) -> tuple[Ended | None, Ended | None]:
    """The newest completed and newest failed checkpoint (``latest``), None where none ended."""
    latest = _Doc(document, request).obj("latest")
    return (
        _ended(latest.optional("completed"), "completed"),
        _ended(latest.optional("failed"), "failed"),
    )


def _ended(doc: _Doc | None, status: CheckpointStatus) -> Ended | None:
    if doc is None:
        return None
    return Ended(
        id=doc.whole("id"),
        status=status,
        duration_ms=doc.figure("end_to_end_duration") or 0.0,
        state_bytes=doc.count("state_size") or 0,
        persisted_bytes=doc.count("persisted_data") or 0,
        failure=doc.text("failure_message") if status == "failed" else None,
    )


def subtasks_of(
    document: Any, request: str = "GET /checkpoints/details/ID/subtasks/VERTEX"
) -> tuple[SubtaskCheckpoint, ...]:
    """Every subtask's part in one checkpoint (``GET .../details/{cid}/subtasks/{vertex}``), by
    index. A subtask that had not acknowledged (``pending_or_failed``) shows nothing else; one
    that ``aborted`` shows its phases so far, unacknowledged."""
    if not isinstance(document, dict):
        raise ShapeError(f"{request} answered {_shown(document)}, not a JSON object")
    subtasks = []
    for sub in _Doc(document, request).items("subtasks"):
        index = sub.whole("index")
        if sub.text("status") != "completed":
            subtasks.append(SubtaskCheckpoint(index=index, acknowledged=False))
            continue
        phases, alignment = sub.obj("checkpoint"), sub.obj("alignment")
        subtasks.append(
            SubtaskCheckpoint(
                index=index,
                acknowledged=not sub.flag("aborted"),
                start_delay_ms=sub.figure("start_delay"),
                alignment_ms=alignment.figure("duration"),
                sync_ms=phases.figure("sync"),
                async_ms=phases.figure("async"),
                state_bytes=sub.count("state_size"),
                processed_bytes=alignment.count("processed"),
                persisted_bytes=alignment.count("persisted"),
                unaligned=sub.flag("unaligned_checkpoint"),
            )
        )
    return tuple(sorted(subtasks, key=lambda s: s.index))


def checkpoint_of(ended: Ended, vertices: Sequence[VertexCheckpoint]) -> Checkpoint:
    """One ended checkpoint: its summary and its vertices' subtasks."""
    return Checkpoint(
        id=ended.id,
        status=ended.status,
        duration_ms=ended.duration_ms,
        vertices=tuple(vertices),
        failure=ended.failure,
        persisted_bytes=ended.persisted_bytes,
        state_bytes=ended.state_bytes,
    )


class FlinkCheckpoints:
    """One job's checkpoints, window after window (see the module).

    Args:
        rest: the cluster's client.
        job_id: the job's id.
        job: the job's name, which the findings name.
        version: the cluster's Flink version, for messages.
    """

    def __init__(self, rest: FlinkRest, job_id: str, job: str, version: str = "") -> None:
        self.rest, self.job_id, self.job, self.version = rest, job_id, job, version
        self._config: CheckpointConfig | None = None
        self._off: str | None = None
        """Why the job takes no checkpoints, once Flink said so (a 404, or no interval)."""
        self._ended: dict[int, Checkpoint] = {}
        self.last_cost = Cost()
        """What the last :meth:`read` cost."""

    @property
    def _base(self) -> str:
        return f"/jobs/{self.job_id}/checkpoints"

    def read(self, graph: FlinkGraph) -> tuple[CheckpointWindow | None, Finding | None]:
        """The job's checkpoints now and None, or None and the ``checkpoints-unread`` finding.
        Never raises."""
        before = self.rest.cost
        try:
            return self._read(graph), None
        except _UnreadError as unread:
            return None, Finding("checkpoints-unread", self.job, str(unread))
        except BpmonError as err:  # a 5xx or a timeout after the retries, not JSON, a 4xx
            return None, Finding("checkpoints-unread", self.job, f"checkpoints not read: {err}")
        except (KeyError, TypeError, ValueError, AttributeError) as err:  # a shape not foreseen
            detail = f"GET {self._base} answered an unexpected document ({type(err).__name__})"
            return None, Finding("checkpoints-unread", self.job, self._shape(detail))
        finally:
            self.last_cost = self.rest.cost - before

    def _shape(self, what: object) -> str:
        where = f"Flink {self.version}".strip()
        return (
            f"checkpoints not read: {what}; bpmon reads the checkpoint statistics of Flink "
            f"1.13 to 2.3: report this with {where}'s answer"
        )

    def _get(self, path: str) -> Any:
        """``path``'s document; a 404 says checkpointing is off (Flink has no statistics)."""
        try:
            return self.rest.get(path)
        except NotFoundError as err:
            says = err.flink_says.rsplit("Exception: ", 1)[-1]
            said = f", {says}" if says else ""
            raise _OffError(
                f"checkpointing is off for this job (GET {path}: 404{said}); {ENABLE}"
            ) from None

    def _read(self, graph: FlinkGraph) -> CheckpointWindow:
        if self._off is not None:
            raise _UnreadError(self._off)
        config = self._config
        if config is None:
            path = f"{self._base}/config"
            try:
                config = config_of(self._get(path), f"GET {path}")
            except ShapeError as wrong:
                raise _UnreadError(self._shape(wrong)) from None
            except _OffError as off:
                self._off = str(off)  # fixed for the job's life: not asked again
                raise
            self._config = config  # fixed for the job's life
        if config.interval_ms is None:
            self._off = (
                f"checkpointing is off for this job (GET {self._base}/config: interval "
                f"{NEVER_MS} ms, no checkpoint is ever due); {ENABLE}"
            )
            raise _UnreadError(self._off)
        try:
            answer = self._get(self._base)
            completed, failed = counts_of(answer, f"GET {self._base}")
            latest = latest_of(answer, f"GET {self._base}")
            last_completed, last_failed = (
                None if ended is None else self._checkpoint(ended, graph) for ended in latest
            )
        except ShapeError as wrong:
            raise _UnreadError(self._shape(wrong)) from None
        self._ended = {c.id: c for c in (last_completed, last_failed) if c is not None}
        return CheckpointWindow(
            mode=config.mode,
            interval_ms=config.interval_ms,
            completed=completed,
            failed=failed,
            last_completed=last_completed,
            last_failed=last_failed,
            timeout_ms=config.timeout_ms,
            aligned_timeout_ms=config.aligned_timeout_ms,
        )

    def _checkpoint(self, ended: Ended, graph: FlinkGraph) -> Checkpoint:
        """The ended checkpoint in full: kept from an earlier window, else read now (its
        details are final once it ended)."""
        kept = self._ended.get(ended.id)
        if kept is not None and kept.status == ended.status:
            return kept
        vertices = []
        for vertex in graph.vertices:
            path = f"{self._base}/details/{ended.id}/subtasks/{vertex.id}"
            try:
                document = self.rest.get(path)
            except NotFoundError:
                continue  # a vertex not in this checkpoint (not in the job when it was taken)
            vertices.append(VertexCheckpoint(vertex.name, subtasks_of(document, f"GET {path}")))
        if not vertices:
            raise _UnreadError(
                f"checkpoints not read: checkpoint {ended.id}'s details are gone from Flink's "
                f"history (GET {self._base}/details/{ended.id}/subtasks/VERTEX: 404 for every "
                "vertex); web.checkpoints.history keeps the last 10: raise it if checkpoints end "
                "faster than bpmon's windows"
            )
        return checkpoint_of(ended, vertices)
