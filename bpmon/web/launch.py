"""``bpmon serve``, from its flags to a running server and back to a clean stop.

Everything a user can get wrong is checked before anything starts (the token and the address,
the scenarios, the rules, the port), so a mistake is one line and exit code 2 with no job left
behind. Then the watches start, the server runs until Ctrl-C or SIGTERM, and every watch is
stopped; what did not end cleanly is returned for the command to report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bpmon import service
from bpmon.errors import ConfigError
from bpmon.watching import Watches
from bpmon.web.app import create_app
from bpmon.web.auth import check_exposure, load_token
from bpmon.web.server import bind, interruptible, make_server, run, url_of


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The flags of ``bpmon serve`` (see its ``--help``)."""

    host: str = "127.0.0.1"
    port: int = 8484
    runs_dir: Path = service.DEFAULT_RUNS_DIR
    rules_path: Path | None = None
    scenarios: Sequence[str] = ()
    monitor_pid: int | None = None
    profile: str | None = None
    topology: str | None = None
    monitor_flink: str | None = None
    flink_job: str | None = None
    every_s: float = 10.0
    token_file: Path | None = None
    metrics_public: bool = False


def serve(options: ServeOptions, announce: Callable[[str], None]) -> tuple[str, ...]:
    """Check the options, start the watches, serve until stopped; return what leaked.

    Raises:
        BpmonError: a bad option, scenario, rules file or address (nothing is left running).
        KeyboardInterrupt: Ctrl-C or SIGTERM while the watches were starting (all stopped).
    """
    token = load_token(options.token_file)
    check_exposure(options.host, token)
    _check(options)
    scenarios = [service.resolve_scenario(name) for name in options.scenarios]
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise ConfigError(f"--run: two scenarios share a job name ({', '.join(names)})")
    settings = service.Settings(runs_dir=options.runs_dir, rules_path=options.rules_path)
    settings.rules()  # a bad rules file is an error now, not once a job runs
    sock = bind(options.host, options.port)
    watches = Watches(settings, every_s=options.every_s)
    try:
        with interruptible():
            for scenario in scenarios:
                watches.start_scenario(scenario)
            if options.monitor_pid is not None:
                watches.start_process(
                    options.monitor_pid,
                    profile=options.profile or "python-queue",
                    topology=options.topology,
                )
            if options.monitor_flink is not None:
                watches.start_flink(options.monitor_flink, job=options.flink_job)
        app = create_app(watches, token=token, metrics_public=options.metrics_public)
        server = make_server(app, watches)
        url = url_of(sock)
        watching = ", ".join(watches.running()) or "nothing yet"
        auth = "a bearer token" if token is not None else "no token (loopback only)"
        announce(f"bpmon: serving {url} (API {url}/api/v1/jobs, docs {url}/docs) with {auth}")
        announce(f"bpmon: watching {watching}, a burst every {options.every_s:g} s; Ctrl-C stops")
        run(server, sock)
    finally:
        leaks = watches.stop_all()
        sock.close()
    return leaks


def _check(options: ServeOptions) -> None:
    if not options.every_s > 0:
        raise ConfigError(f"--every {options.every_s}: must be a positive number of seconds")
    if options.monitor_pid is None and (options.profile or options.topology):
        raise ConfigError("--profile and --topology go with --monitor-pid PID")
    if options.monitor_flink is None and options.flink_job is not None:
        raise ConfigError("--flink-job goes with --monitor-flink URL")
