"""``bpmon serve``, from its flags to a running server and back to a stop that always ends.

Everything a user can get wrong is checked before anything starts (the token and the address,
the ``--allow-host`` names, the TLS files, the scenarios, the rules, the port), so a mistake is
one line and exit code 2 with no job left behind. Then the watches start, the server runs until
Ctrl-C or SIGTERM, and every watch is stopped in the time the stop has left
(:mod:`bpmon.web.stopping`: the process is gone FORCE_S after the first signal, whatever its
threads do); what did not end cleanly is returned for the command to report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bpmon.model.errors import ConfigError
from bpmon.service import facade
from bpmon.service.clusters import ClusterWatch
from bpmon.service.scenarios import Scenario, resolve_scenario
from bpmon.service.watching import STUCK_AFTER_MIN_S, STUCK_AFTER_S, Watches
from bpmon.web.apidocs import check_assets
from bpmon.web.app import create_app
from bpmon.web.auth import check_exposure, load_token
from bpmon.web.hosts import allowed_names, check_allow_host, is_local
from bpmon.web.server import bind, make_server, run, url_of
from bpmon.web.stopping import Stopping
from bpmon.web.tls import check_tls


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The flags of ``bpmon serve`` (see its ``--help``)."""

    host: str = "127.0.0.1"
    port: int = 8484
    runs_dir: Path = facade.DEFAULT_RUNS_DIR
    rules_path: Path | None = None
    autoscaler_path: Path | None = None
    scenarios: Sequence[str] = ()
    monitor_pid: int | None = None
    profile: str | None = None
    topology: str | None = None
    monitor_flink: Sequence[str] = ()
    flink_job: str | None = None
    every_s: float = 10.0
    stuck_after_s: float = STUCK_AFTER_S
    token_file: Path | None = None
    metrics_public: bool = False
    allow_hosts: Sequence[str] = ()
    certfile: Path | None = None
    keyfile: Path | None = None


def serve(options: ServeOptions, announce: Callable[[str], None]) -> tuple[str, ...]:
    """Check the options, start the watches, serve until stopped; return what leaked.

    Raises:
        BpmonError: a bad option, scenario, rules file or address (nothing is left running).
        KeyboardInterrupt: Ctrl-C or SIGTERM while the watches were starting (all stopped).
    """
    token = load_token(options.token_file)
    check_exposure(options.host, token)
    extra = [check_allow_host(name) for name in options.allow_hosts]
    tls = check_tls(options.certfile, options.keyfile)
    check_assets()
    _check(options)
    scenarios = [resolve_scenario(name) for name in options.scenarios]
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise ConfigError(f"--run: two scenarios share a job name ({', '.join(names)})")
    settings = facade.Settings(
        runs_dir=options.runs_dir,
        rules_path=options.rules_path,
        autoscaler_path=options.autoscaler_path,
    )
    settings.rules()  # a bad rules or autoscaler file is an error now, not once a job runs
    sock = bind(options.host, options.port)
    hosts = allowed_names([options.host, sock.getsockname()[0]], extra, token)
    watches = Watches(settings, every_s=options.every_s, stuck_after_s=options.stuck_after_s)
    stopping = Stopping(say=announce)
    clusters = ClusterWatch(
        watches, options.monitor_flink, job=options.flink_job, every_s=options.every_s
    )
    with stopping.handling():
        try:
            _start(watches, scenarios, options, stopping, clusters)
            watches.start_upkeep()  # compaction and retention, now and every hour
            app = create_app(
                watches,
                token=token,
                metrics_public=options.metrics_public,
                allow_hosts=hosts,
                secure_cookie=tls is not None,
                stopping=stopping,
            )
            server = make_server(app, watches, stopping=stopping, tls=tls)
            _announce(announce, url_of(sock, tls=tls is not None), options, watches, token, hosts)
            run(server, sock)
        finally:
            clusters.stop()
            leaks = tuple(dict.fromkeys(watches.stop_all(deadline_s=stopping.left())))
            sock.close()
    return leaks


def _start(
    watches: Watches,
    scenarios: list[Scenario],
    options: ServeOptions,
    stopping: Stopping,
    clusters: ClusterWatch,
) -> None:
    """Start every watch asked for, and the watch of each ``--monitor-flink`` cluster's jobs;
    the first signal meanwhile interrupts (KeyboardInterrupt)."""
    stopping.interrupting = True
    try:
        for scenario in scenarios:
            watches.start_scenario(scenario)
        if options.monitor_pid is not None:
            watches.start_process(
                options.monitor_pid,
                profile=options.profile or "python-queue",
                topology=options.topology,
            )
        if options.monitor_flink:
            clusters.start()
    finally:
        stopping.interrupting = False


def _announce(
    announce: Callable[[str], None],
    url: str,
    options: ServeOptions,
    watches: Watches,
    token: str | None,
    hosts: set[str] | None,
) -> None:
    watching = ", ".join(watches.running()) or "nothing yet"
    auth = "a bearer token" if token is not None else "no token (loopback only)"
    names = "any Host (the token guards)" if hosts is None else _hosts_said(hosts)
    announce(f"bpmon: serving {url} (API {url}/api/v1/jobs, docs {url}/docs) with {auth}")
    announce(f"bpmon: answering {names}")
    announce(f"bpmon: watching {watching}, a burst every {options.every_s:g} s; Ctrl-C stops")


def _hosts_said(hosts: set[str]) -> str:
    shown = [f"[{h}]" if ":" in h else h for h in sorted(hosts) if not is_local(h)]
    return "Host " + ", ".join(["localhost", "loopback addresses", *shown])


def _check(options: ServeOptions) -> None:
    if not options.every_s > 0:
        raise ConfigError(f"--every {options.every_s}: must be a positive number of seconds")
    if not options.stuck_after_s >= STUCK_AFTER_MIN_S:
        raise ConfigError(
            f"--stuck-after {options.stuck_after_s:g}: must be at least {STUCK_AFTER_MIN_S:g} s "
            "(a watch shows a sign of life once a second, a burst's collection can take longer)"
        )
    if options.monitor_pid is None and (options.profile or options.topology):
        raise ConfigError("--profile and --topology go with --monitor-pid PID")
    if len(set(options.monitor_flink)) != len(options.monitor_flink):
        raise ConfigError("--monitor-flink: a cluster is given twice; give each URL once")
    if not options.monitor_flink and options.flink_job is not None:
        raise ConfigError("--flink-job goes with --monitor-flink URL")
