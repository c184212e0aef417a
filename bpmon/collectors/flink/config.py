"""The cluster settings bpmon's sampling and metric reads depend on, read once per watch.

``GET /jobmanager/config`` lists the JobManager's configuration as ``[{"key", "value"}]``: only the
options the cluster's ``config.yaml`` (or its dynamic properties) set, never the defaults, so an
absent key is Flink's default. What bpmon reads:

- ``rest.flamegraph.enabled`` (default false): whether Flink's own sampler answers
  ``GET /jobs/{job}/vertices/{vertex}/flamegraph``; a disabled one answers
  ``{"endTimestamp": -2}`` (:mod:`~bpmon.collectors.flink.flame`);
- ``rest.flamegraph.num-samples`` (100) and ``rest.flamegraph.delay-between-samples`` (50 ms): the
  burst Flink takes of each task thread (the cluster's, not bpmon's ``--samples``);
- ``rest.flamegraph.refresh-interval`` (60 s): Flink caches a graph this long after it ended, and
  a request before then is answered from the cache without sampling again (the cache cannot be
  bypassed from the REST API);
- ``rest.flamegraph.stack-depth`` (100 frames);
- ``metrics.fetcher.update-interval`` (10 s): how old a metric the REST store serves may be;
- ``taskmanager.network.memory.buffer-debloat.enabled`` (false) and ``...buffer-debloat.target``
  (1 s): buffer debloating (FLIP-183), each input gate sizing its buffers to hold about the
  target's worth of its throughput. The JobManager shows the cluster's ``config.yaml``, which a
  standalone or session cluster's TaskManagers read too; a TaskManager started with other
  options is not seen (its ``debloatedBufferSize`` metrics still are).

Durations are written as Flink writes them: ``"50 ms"``, ``"1 min"``, ``"2 s"``, a bare number of
milliseconds, or ISO-8601 (``PT1M``). A value bpmon cannot read falls back to Flink's default, so
a cluster is never refused for its settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bpmon.collectors.flink.rest import FlinkRest
from bpmon.model.durations import duration_ms
from bpmon.model.errors import BpmonError


@dataclass(frozen=True, slots=True)
class FlinkClusterConfig:
    """The settings of one cluster that bpmon's sampling depends on (Flink's defaults where the
    cluster sets nothing).

    Attributes:
        flamegraph: ``rest.flamegraph.enabled``.
        flame_samples: ``rest.flamegraph.num-samples``.
        flame_delay_ms: ``rest.flamegraph.delay-between-samples``.
        flame_refresh_s: ``rest.flamegraph.refresh-interval``.
        flame_depth: ``rest.flamegraph.stack-depth``.
        fetch_interval_s: ``metrics.fetcher.update-interval``.
        debloat: ``taskmanager.network.memory.buffer-debloat.enabled``.
        debloat_target_ms: ``taskmanager.network.memory.buffer-debloat.target``.
        read: whether ``/jobmanager/config`` answered (False: all of these are defaults).
    """

    flamegraph: bool = False
    flame_samples: int = 100
    flame_delay_ms: float = 50.0
    flame_refresh_s: float = 60.0
    flame_depth: int = 100
    fetch_interval_s: float = 10.0
    debloat: bool = False
    debloat_target_ms: float = 1000.0
    read: bool = True

    @property
    def flame_burst_s(self) -> float:
        """How long Flink's sampler takes to sample a task once."""
        return self.flame_samples * self.flame_delay_ms / 1000


DEFAULTS = FlinkClusterConfig()
DEBLOAT = "taskmanager.network.memory.buffer-debloat"
"""Flink's own defaults (a cluster whose ``config.yaml`` sets none of these)."""


def config_of(answer: Any) -> FlinkClusterConfig:
    """The settings in a ``/jobmanager/config`` answer (a list of ``{"key", "value"}``)."""
    if not isinstance(answer, list):
        return FlinkClusterConfig(read=False)
    values = {
        str(item.get("key")): str(item.get("value"))
        for item in answer
        if isinstance(item, dict) and "key" in item
    }
    return FlinkClusterConfig(
        flamegraph=values.get("rest.flamegraph.enabled", "").strip().lower() == "true",
        flame_samples=_int(values, "rest.flamegraph.num-samples", DEFAULTS.flame_samples),
        flame_delay_ms=_ms(
            values, "rest.flamegraph.delay-between-samples", DEFAULTS.flame_delay_ms
        ),
        flame_refresh_s=_ms(values, "rest.flamegraph.refresh-interval", 60e3) / 1000,
        flame_depth=_int(values, "rest.flamegraph.stack-depth", DEFAULTS.flame_depth),
        fetch_interval_s=_ms(values, "metrics.fetcher.update-interval", 10e3) / 1000,
        debloat=values.get(f"{DEBLOAT}.enabled", "").strip().lower() == "true",
        debloat_target_ms=_ms(values, f"{DEBLOAT}.target", DEFAULTS.debloat_target_ms),
    )


def read_config(rest: FlinkRest) -> FlinkClusterConfig:
    """The cluster's settings; Flink's defaults with ``read=False`` when the JobManager does not
    show its configuration (a proxy that hides it, an error)."""
    try:
        return config_of(rest.get("/jobmanager/config"))
    except BpmonError:
        return FlinkClusterConfig(read=False)


def _int(values: Mapping[str, str], key: str, default: int) -> int:
    try:
        number = int(values[key].strip())
    except (KeyError, ValueError):
        return default
    return number if number > 0 else default


def _ms(values: Mapping[str, str], key: str, default: float) -> float:
    text = values.get(key)
    found = duration_ms(text) if text is not None else None
    return found if found is not None and found > 0 else default
