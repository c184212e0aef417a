"""The service facade: every surface (CLI, server, dashboard) stands on this module and the model.

It makes the watches surfaces ask for — a scenario on bpmon's runtime (:func:`run_scenario`),
another Python process read with py-spy (:func:`monitor_process`), a job of a Flink cluster
(:func:`monitor_flink`, and :func:`rescale_flink` for ``--verify``) — each a stream of
:mod:`bpmon.model.events` from the run loop (:func:`~bpmon.service.loop.watch`), and reads the
reports they stored. Surfaces consume the events and never reach below: they render model
values, and stopping a watch is closing its generator (or setting its ``stop`` event). What a
surface builds a watch from (:class:`Settings`, :class:`WatchPlan`) and runs it with
(:func:`watch`, :func:`drain`, :func:`save_report`) is offered here too, so a surface imports
one module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from bpmon.collectors.flink.rescale import FlinkRescale
from bpmon.collectors.flink.target import FlinkTarget
from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.collectors.pyspy.target import ProcessTarget
from bpmon.model.datafiles import set_data_dir, shipped_doc
from bpmon.model.errors import ConfigError, HistoryError
from bpmon.model.events import WatchEvent
from bpmon.model.signals import VIEWS, Signal
from bpmon.model.values import Report, RunInfo
from bpmon.scenario import Scenario
from bpmon.service.loop import drain, observation_levels, save_report, watch
from bpmon.service.settings import (
    DEFAULT_RUNS_DIR,
    Settings,
    WatchPlan,
    outside_plan,
    scenario_plan,
)

__all__ = [
    "DEFAULT_RUNS_DIR",
    "Settings",
    "WatchPlan",
    "drain",
    "format_doc",
    "load_report",
    "monitor_flink",
    "monitor_process",
    "observation_levels",
    "outside_plan",
    "rescale_flink",
    "run_bursts",
    "run_scenario",
    "save_report",
    "scenario_plan",
    "stored_runs",
    "use_data_dir",
    "view_of",
    "watch",
]


def run_scenario(
    scenario: Scenario,
    settings: Settings | None = None,
    *,
    bursts: int | None = 1,
    duration_s: float | None = None,
    every_s: float | None = None,
    stop: threading.Event | None = None,
    live: bool = True,
    observe: str = "runtime",
) -> Iterator[WatchEvent]:
    """Run ``scenario`` on bpmon's runtime and watch it: the events of :func:`watch`.

    With ``bursts=None`` the job runs until stopped, a burst every ``every_s`` seconds.
    ``observe`` diagnoses from only what that target would show of the job (``runtime``: all;
    ``flink``: what Flink's REST API and samples give; ``pyspy``: stacks alone).

    Raises:
        ConfigError: ``observe`` names no known target.
    """
    plan = scenario_plan(scenario, bursts=bursts, duration_s=duration_s, every_s=every_s)
    target = RuntimeTarget(scenario, view=view_of(observe))
    return watch(target, plan, settings, stop=stop, live=live)


def view_of(observe: str) -> frozenset[Signal]:
    """The signals ``--observe NAME`` keeps; ConfigError naming the choices otherwise."""
    view = VIEWS.get(observe)
    if view is None:
        raise ConfigError(
            f"--observe {observe}: expected one of {', '.join(VIEWS)} (what that target would "
            "show of the job; default runtime, everything)"
        )
    return view


def monitor_process(
    pid: int,
    *,
    collector_profile: str = "python-queue",
    topology: str | None = None,
    samples: int = 100,
    interval_ms: float = 50.0,
    bursts: int | None = 1,
    every_s: float | None = None,
    pause: bool = False,
    settings: Settings | None = None,
    stop: threading.Event | None = None,
    live: bool = True,
) -> Iterator[WatchEvent]:
    """Diagnose an external Python process through py-spy (``docs/topology.md``)."""
    plan = outside_plan(samples, interval_ms, bursts, every_s)
    target = ProcessTarget(pid, collector_profile=collector_profile, topology=topology, pause=pause)
    return watch(target, plan, settings, stop=stop, live=live)


def monitor_flink(
    url: str,
    *,
    job: str | None = None,
    collector_profile: str = "flink-jvm",
    samples: int = 100,
    interval_ms: float = 50.0,
    bursts: int | None = 1,
    every_s: float | None = None,
    settings: Settings | None = None,
    stop: threading.Event | None = None,
    live: bool = True,
    label: str | None = None,
) -> Iterator[WatchEvent]:
    """Diagnose a running job of the Flink cluster at ``url`` (its REST address) by id or name.

    The job is found and its graph read here, so an unreachable cluster or an unknown job is an
    error at once (:class:`~bpmon.model.errors.CollectorError`). ``label``: added to the job's
    name (its cluster, when several are watched).
    """
    plan = outside_plan(samples, interval_ms, bursts, every_s)
    target = FlinkTarget(url, job, collector_profile=collector_profile, label=label)
    return watch(target, plan, settings, stop=stop, live=live)


RESCALE_TIMEOUT_S = 300.0
"""How long ``--verify`` waits for a Flink job to run at the recommended parallelism."""
RESCALE_SETTLE_S = 20.0
"""How long a rescaled Flink job runs before it is sampled again: backpressure that remains
builds up again within seconds, and Flink's busy time averages over its last few seconds."""


def rescale_flink(
    url: str,
    job: str | None,
    parallelism: Mapping[str, int],
    *,
    say: Callable[[str], None],
    timeout_s: float = RESCALE_TIMEOUT_S,
    settle_s: float = RESCALE_SETTLE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Bring a Flink job to ``parallelism`` (vertex name -> subtasks): through the adaptive
    scheduler where the cluster has it, else by waiting for the user's own rescale; then let it
    run ``settle_s``. Returns the id of the job that runs at it (a restart gives a new one).

    Raises:
        CollectorError: the cluster or job cannot be read, a vertex is unknown, Flink refused the
            change, or the job did not run at it within ``timeout_s`` (with what runs instead).
    """
    rescale = FlinkRescale(url, job)
    rescale.check_slots(parallelism)
    asked = ", ".join(f"{name} to {n}" for name, n in parallelism.items())
    if rescale.adaptive():
        say(f"asking Flink's adaptive scheduler to rescale {asked} (resource requirements)")
        rescale.request(parallelism)
    else:
        say(
            f"the cluster cannot rescale in place (no adaptive scheduler): rescale {asked} "
            f"yourself (a savepoint, then a restart at that parallelism); waiting up to "
            f"{timeout_s:g} s for it"
        )
    ref = rescale.wait(parallelism, timeout_s)
    say(f"{ref.name!r} ({ref.id}) runs at {asked}; letting it settle {settle_s:g} s")
    sleep(settle_s)
    return ref.id


def load_report(run: str, settings: Settings | None = None, burst: int = 0) -> Report:
    """A saved report by run id, run directory or file path (burst ``burst`` of a run)."""
    return (settings or Settings()).store().load(run, burst=burst)


def stored_runs(
    settings: Settings | None = None, on_corrupt: Callable[[HistoryError], None] | None = None
) -> list[RunInfo]:
    """Every stored run, newest first; an unreadable one goes to ``on_corrupt``, untouched."""
    return (settings or Settings()).store().list_runs(on_corrupt)


def run_bursts(run: str, settings: Settings | None = None) -> list[tuple[int, Report]]:
    """Every burst report of a stored run, in order."""
    return (settings or Settings()).store().bursts(run)


def use_data_dir(path: Path | None) -> None:
    """Look up rules and collector profiles in ``path`` first (``--data-dir``), then bpmon's own.

    Raises:
        ConfigError: ``path`` is not an existing folder.
    """
    set_data_dir(path)


def format_doc(name: str) -> str:
    """One of bpmon's format documents (``scenario``, ``topology``, ``report``, ...) as text."""
    return shipped_doc(name)
