"""The collector of bpmon's own runtime: stack bursts of the job's task threads plus its metrics.

One :meth:`RuntimeCollector.collect` is one monitoring window: a burst of stack samples of every
task thread at once (in-process, ``sys._current_frames``), classified by the ``bpmon-runtime``
profile, and the job's metrics read at the end of the burst (the time accounting and rates cover
the last few seconds, so they describe the same window). The result is an Observation the rules
engine reads like any other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bpmon.collectors.observe import SubtaskMetrics, observation_from_burst
from bpmon.collectors.profile import Profile, load_profile
from bpmon.collectors.sampler import StackSampler
from bpmon.model import Observation
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import TaskMetrics, job_metrics

Progress = Callable[[int, int], None]


def subtask_metrics(m: TaskMetrics) -> SubtaskMetrics:
    """A runtime metrics snapshot in the collectors' terms (ratios are ms/s ÷ 1000)."""
    return SubtaskMetrics(
        task_manager=m.task_manager,
        busy_time_ratio=m.busy_ms_per_s / 1000,
        idle_time_ratio=m.idle_ms_per_s / 1000,
        backpressured_time_ratio=m.backpressured_ms_per_s / 1000,
        out_pool_usage=m.out_pool_usage,
        in_pool_usage=m.in_pool_usage,
        records_in_per_s=m.records_in_per_s,
        records_out_per_s=m.records_out_per_s,
        metrics=m.as_flink(),
    )


class RuntimeCollector:
    """Watches a running :class:`~bpmon.runtime.job.Job`.

    Args:
        job: the running job.
        profile: how to read its stacks (default: the shipped ``bpmon-runtime`` profile).
        run_id: stamped on every Observation.
    """

    def __init__(self, job: Job, profile: Profile | None = None, run_id: str = "") -> None:
        self.job = job
        self.profile = profile or load_profile("bpmon-runtime")
        self.run_id = run_id
        self._sampler = StackSampler(self.profile)

    def collect(
        self, samples: int = 100, interval_ms: float = 50.0, progress: Progress | None = None
    ) -> Observation:
        """One window: a burst of ``samples`` stack samples ``interval_ms`` apart, and metrics."""
        burst = self._sampler.burst(samples, interval_ms, progress=progress)
        metrics = {
            vertex: {m.index: subtask_metrics(m) for m in group}
            for vertex, group in job_metrics(self.job.tasks).items()
        }
        observation = observation_from_burst(
            burst, self.job.scenario, self.profile, self.job.name, "runtime", metrics=metrics
        )
        network = self.job.scenario.network
        return dataclasses.replace(
            observation,
            run_id=self.run_id,
            settings={
                "flow_control": network.flow_control,
                "task_managers": network.task_managers,
                "segment_size": network.segment_size,
            },
        )
