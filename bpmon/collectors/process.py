"""Another Python process as a :class:`~bpmon.collectors.target.Target`, read with py-spy.

The process is not started or stopped by bpmon: :meth:`ProcessTarget.start` only checks that the
profile and topology load, and each :meth:`~ProcessTarget.observe` is a py-spy burst of every
thread, grouped into stages by the topology file (``docs/topology.md``) or by thread names. A
process gives no metrics between bursts, so it has no live snapshot.
"""

from __future__ import annotations

import time

from bpmon.collectors.observe import observation_from_burst
from bpmon.collectors.profile import load_profile
from bpmon.collectors.pyspy import PySpySampler
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.collectors.target import Ending, Sampler
from bpmon.model import Observation, Source
from bpmon.scenario import load_topology


class ProcessTarget:
    """Process ``pid``, watched through py-spy.

    Args:
        pid: the process.
        collector_profile: the collector profile's name or file (what a stack means).
        topology: a topology file saying which stage feeds which, or None.
        pause: pause the process while each sample is read.
    """

    def __init__(
        self,
        pid: int,
        *,
        collector_profile: str = "python-queue",
        topology: str | None = None,
        pause: bool = False,
    ) -> None:
        self.pid = pid
        self.profile = load_profile(collector_profile)
        self.graph = load_topology(topology) if topology is not None else None
        self._sampler: Sampler = PySpySampler(pid, self.profile, pause=pause)

    @property
    def job(self) -> str:
        """The topology's name, else ``pid-PID``."""
        return self.graph.name if self.graph is not None else f"pid-{self.pid}"

    @property
    def source(self) -> Source:
        """Always ``pyspy``."""
        return "pyspy"

    def start(self) -> None:
        """Nothing to start: the process runs on its own."""

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        """One py-spy burst of every thread, as an Observation (no metrics: py-spy has none)."""
        burst = self._sampler.burst(samples, interval_ms, progress=progress, stop=stop)
        return observation_from_burst(burst, self.graph, self.profile, self.job, "pyspy")

    def snapshot(self) -> None:
        """None: a process read with py-spy gives nothing between bursts."""
        return None

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds`` (the process keeps running on its own)."""
        if seconds > 0:
            time.sleep(seconds)

    def stop(self) -> Ending:
        """Nothing to stop."""
        return Ending()
