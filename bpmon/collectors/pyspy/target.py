"""Another Python process as a :class:`~bpmon.collectors.target.Target`, read with py-spy.

The process is not started or stopped by bpmon: :meth:`ProcessTarget.start` only checks that the
profile and topology load, and each :meth:`~ProcessTarget.observe` is a py-spy burst of every
thread, grouped into stages by the topology file (``docs/topology.md``) or by thread names. A
process gives no metrics between bursts, so it has no live snapshot. A process that exits ends
the watch (``JobOverError``: it ended by itself, not a failure of the watch).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bpmon.collectors.observe import observation_from_burst
from bpmon.collectors.profile import load_profile
from bpmon.collectors.pyspy.dumps import PySpySampler, process_not_found
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.collectors.target import Ending, Sampler
from bpmon.model.errors import BpmonError, JobOverError
from bpmon.model.values import Observation, Source
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
        self._started: str | None = None  # the process's start time, once watched
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
        """Nothing to start (the process runs on its own); TargetNotFoundError when there is
        no such process to watch."""
        if not process_alive(self.pid):
            raise process_not_found(self.pid)
        self._started = start_time(self.pid)

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        """One py-spy burst of every thread, as an Observation (no metrics: py-spy has none)."""
        self._raise_if_exited()
        try:
            burst = self._sampler.burst(samples, interval_ms, progress=progress, stop=stop)
        except BpmonError:
            self._raise_if_exited()  # py-spy failed because the process went away
            raise
        return observation_from_burst(burst, self.graph, self.profile, self.job, "pyspy")

    def snapshot(self) -> None:
        """None: a process read with py-spy gives nothing between bursts."""
        return None

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``; JobOverError once the process has exited."""
        if seconds > 0:
            time.sleep(seconds)
        self._raise_if_exited()

    def _raise_if_exited(self) -> None:
        """JobOverError once the process exited (or its PID went to another process)."""
        reused = self._started is not None and start_time(self.pid) != self._started
        if reused or not process_alive(self.pid):
            raise JobOverError(f"process {self.pid} exited")

    def stop(self) -> Ending:
        """Nothing to stop."""
        return Ending()


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (an exited child not yet reaped, a zombie, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, and is not ours
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc here: it answered the signal
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def start_time(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22), so
    a PID given to another process after ours exited is told apart; None where there is no
    /proc (then the PID alone is trusted)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None
