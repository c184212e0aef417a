"""Helpers shared by the runtime tests (and the service and web tests that run jobs): the job
fixtures' types, a diamond scenario, a channel's producer, reading a gate dry, a subtask's dominant
state, the task threads alive. The fixtures themselves are in this folder's ``conftest.py``."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputChannel, InputGate, LocalInputChannel
from bpmon.runtime.job import Job, JobResult
from bpmon.runtime.metrics import TaskMetrics
from bpmon.runtime.network import NetworkEnvironment
from bpmon.scenario import Scenario

StartJob = Callable[[Scenario], Job]
"""The ``start_job`` fixtures: build and start a job, ended cleanly at teardown."""
StopJob = Callable[[Job], JobResult]
"""The ``stop_job`` fixture: stop a job and assert it leaked nothing."""

# File order is deliberately not topological: the plan and the placement must follow the graph,
# not the file.
DIAMOND = """
name = "placement"

[network]
task_managers = {tms}

[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "map", partitioner = "rebalance" }}]

[[operators]]
name = "map"
kind = "map"
parallelism = 3
inputs = [{{ from = "source", partitioner = "rebalance" }}]

[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 50
"""
"""source (2) -> map (3) -> sink (1), all rebalanced, on ``{tms}`` task managers (to format)."""


def producer_of(channel: InputChannel) -> str:
    """The name of the result partition a channel reads ("source (1/2) -> map")."""
    if isinstance(channel, LocalInputChannel):
        return channel.subpartition.partition.name
    assert isinstance(channel, RemoteInputChannel) and channel.sender is not None
    return channel.sender.subpartition.partition.name


def read_all(env: NetworkEnvironment, gate: InputGate) -> tuple[list[object], list[int]]:
    """Read everything the gate has now: (records, buffer sizes); buffers are recycled."""
    records: list[object] = []
    sizes: list[int] = []
    with env.lock:
        while (polled := gate.poll_next()) is not None:
            item = polled[0]
            if isinstance(item, Buffer):
                records.extend(item.records)
                sizes.append(item.size)
                item.recycle()
    return records, sizes


def dominant(m: TaskMetrics) -> str:
    """The state a subtask spent most of its measured span in: busy, idle or bp."""
    shares = {"busy": m.busy_ms_per_s, "idle": m.idle_ms_per_s, "bp": m.backpressured_ms_per_s}
    return max(shares, key=lambda state: shares[state])


def task_threads() -> list[str]:
    """The names of the runtime's task threads still alive (``"src (1/2)"``...)."""
    return [t.name for t in threading.enumerate() if re.fullmatch(r".+ \(\d+/\d+\)", t.name)]
