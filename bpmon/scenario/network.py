"""The ``[network]`` table of a scenario file: Flink's network-stack settings, validated.

``NetworkConfig`` validates itself so that the network stack can be built directly (tests,
benchmarks) with the same clear errors a scenario file gets; the scenario loader wraps its
``ConfigError`` into a ``ScenarioError`` that names the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal, get_args

from bpmon.model.errors import ConfigError
from bpmon.model.values import FlowControl

OutputFlush = Literal["finish", "publish"]
STRING_KEYS = {"flow_control": get_args(FlowControl), "output_flush": ("finish", "publish")}
"""Keys that take one of a few strings, and the strings."""

HYBRID_RATIOS = (
    "hybrid_spill_threshold",
    "hybrid_spill_buffer_ratio",
    "hybrid_full_spill_trigger",
    "hybrid_full_release_threshold",
    "hybrid_full_release_buffer_ratio",
)
"""The hybrid shuffle's shares of a partition's pool (Flink's ``HybridShuffleConfiguration``)."""
FLOAT_KEYS = ("link_bandwidth_mb_s", "latency_ms", *HYBRID_RATIOS)
"""Keys that take any number; every other key but those of ``STRING_KEYS`` and ``BOOL_KEYS``
is an integer."""
BOOL_KEYS = ("debloat",)
"""Keys that take ``true`` or ``false``."""
DEBLOAT_PERIOD_S = 0.2
"""How often a gate's buffer size is evaluated again (Flink's
``taskmanager.network.memory.buffer-debloat.period``, 200 ms)."""

MIN_SEGMENT_SIZE = 256
"""Flink's ``taskmanager.memory.min-segment-size``: no buffer is smaller than this."""


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """The ``[network]`` table: Flink 1.20's network defaults, one simulated cluster.

    Attributes:
        segment_size: bytes per network buffer (memory segment).
        buffers_per_channel: exclusive buffers per remote input channel, its initial credit; on the
            output side, each subpartition's share of the pool's maximum.
        floating_buffers_per_gate: floating buffers per input gate, and extra buffers per result
            partition.
        max_buffers_per_channel: buffers one output subpartition may hold before its pool turns
            unavailable.
        max_overdraft_buffers_per_gate: overdraft buffers per result partition (FLIP-227); 0
            disables overdraft.
        flow_control: ``"credit"`` (FLINK-7282) or ``"tcp"`` (a full receiver stalls its whole
            connection).
        buffer_timeout_ms: output flusher period; 0 flushes after every record.
        output_flush: what a flush does to a pipelined partition's partly filled buffer:
            ``"publish"`` (the default, Flink's behaviour) makes its bytes readable as a slice
            and the writer keeps filling it; ``"finish"`` finishes it (less data in flight, so
            backpressure builds several times sooner than in Flink).
        task_managers: simulated task managers; subtasks are placed in their slots by slot sharing.
        link_bandwidth_mb_s: cap in 10^6 bytes/s on each direction between two task managers,
            shared by every connection in that direction; 0 = none.
        latency_ms: one-way delay of a remote channel's buffers, events and credit announcements;
            0 = none.
        total_buffers: segments per task manager's NetworkBufferPool; 0 = enough for the job.
        hybrid_spill_threshold: selective spilling (FLIP-235) starts when the buffers a hybrid
            partition requested reach this share of its pool.
        hybrid_spill_buffer_ratio: selective spilling then spills and releases this share of
            the pool.
        hybrid_full_spill_trigger: full spilling spills every unspilled finished buffer once
            they reach this share of the pool.
        hybrid_full_release_threshold: full spilling releases spilled buffers from memory when
            the requested buffers reach this share of the pool.
        hybrid_full_release_buffer_ratio: the share of the pool it then releases.
        debloat: buffer debloating (FLIP-183, Flink's
            ``taskmanager.network.memory.buffer-debloat.enabled``): each input gate sizes its
            buffers to hold about ``debloat_target_ms`` of its measured throughput.
        debloat_target_ms: the time the buffered data of a gate should take to consume
            (``buffer-debloat.target``, 1 s).
    """

    segment_size: int = 32768
    buffers_per_channel: int = 2
    floating_buffers_per_gate: int = 8
    max_buffers_per_channel: int = 10
    max_overdraft_buffers_per_gate: int = 5
    flow_control: FlowControl = "credit"
    buffer_timeout_ms: int = 100
    output_flush: OutputFlush = "publish"
    task_managers: int = 2
    link_bandwidth_mb_s: float = 0.0
    latency_ms: float = 0.0
    total_buffers: int = 0
    hybrid_spill_threshold: float = 0.7
    hybrid_spill_buffer_ratio: float = 0.4
    hybrid_full_spill_trigger: float = 0.5
    hybrid_full_release_threshold: float = 0.7
    hybrid_full_release_buffer_ratio: float = 0.4
    debloat: bool = False
    debloat_target_ms: int = 1000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in BOOL_KEYS:
                if not isinstance(value, bool):
                    raise ConfigError(f"network.{f.name} = {value!r}: expected true or false")
                continue
            if f.name in STRING_KEYS:
                first, second = STRING_KEYS[f.name]
                if value not in (first, second):
                    raise ConfigError(
                        f'network.{f.name} = {value!r}: expected "{first}" or "{second}"'
                    )
                continue
            expected_type = (int, float) if f.name in FLOAT_KEYS else int
            if isinstance(value, bool) or not isinstance(value, expected_type):
                raise ConfigError(
                    f"network.{f.name} = {value!r}: expected a number, got {type(value).__name__}"
                )
            if not math.isfinite(value):
                raise ConfigError(f"network.{f.name} = {value!r}: expected a finite number")
        self._check_ranges()

    def _check_ranges(self) -> None:
        if self.segment_size < MIN_SEGMENT_SIZE:
            raise ConfigError(
                f"network.segment_size = {self.segment_size}: a segment holds at least "
                f"{MIN_SEGMENT_SIZE} bytes (Flink's min-segment-size); use 32768, the default"
            )
        positive = (
            "buffers_per_channel",
            "floating_buffers_per_gate",
            "max_buffers_per_channel",
            "task_managers",
            "debloat_target_ms",
        )
        for name in positive:
            value = getattr(self, name)
            if value <= 0:
                raise ConfigError(
                    f"network.{name} = {value}: must be at least 1 "
                    f"(default {NetworkConfig.__dataclass_fields__[name].default})"
                )
        non_negative = (
            "max_overdraft_buffers_per_gate",
            "buffer_timeout_ms",
            "link_bandwidth_mb_s",
            "latency_ms",
            "total_buffers",
        )
        for name in non_negative:
            value = getattr(self, name)
            if value < 0:
                raise ConfigError(
                    f"network.{name} = {value}: must be 0 or more "
                    f"(default {NetworkConfig.__dataclass_fields__[name].default})"
                )
        for name in HYBRID_RATIOS:
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ConfigError(
                    f"network.{name} = {value}: a share of the pool, more than 0 and at most 1 "
                    f"(default {NetworkConfig.__dataclass_fields__[name].default})"
                )
