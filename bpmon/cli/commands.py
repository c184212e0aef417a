"""The ``bpmon`` command line: a surface over :mod:`bpmon.service.facade`.

Every expected error is a :class:`bpmon.model.errors.BpmonError`, printed as one line on stderr with
its exit code; a traceback is a bug. Ctrl-C stops a running job cleanly (exit code 130).

``bpmon --version`` and ``bpmon -h`` start at once: this module imports typer, the options and
the model's errors, and every command imports the service, the renderers and rich in its body,
when it runs. Typer reads the commands' signatures when ``bpmon`` starts (with ``from __future__
import annotations`` it resolves their annotation strings in this module's globals), so what a
signature names (typing's names, Path, the options of :mod:`bpmon.cli.options`) stays imported
here; tests/cli/test_startup.py checks what ``--version`` and ``-h`` import.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

import bpmon
from bpmon.cli import INTERRUPTED
from bpmon.cli.help import PlainGroup, use_plain_help
from bpmon.cli.history import analyze, history_app
from bpmon.cli.options import (
    DEFAULT_RUNS_DIR,
    STUCK_AFTER_S,
    AutoscalerFile,
    Follow,
    RulesFile,
    RunsDir,
    Steps,
    errors_as_exit_codes,
)
from bpmon.model.errors import BpmonError, ConfigError, JobError, JobOverError, SaveError

if TYPE_CHECKING:  # the helpers' annotations only: their modules are imported where they are used
    from rich.console import Console

    from bpmon.model.events import JobEnded, WatchEvent
    from bpmon.model.values import Report
    from bpmon.service.scenarios import Scenario
    from bpmon.service.settings import Settings
    from bpmon.service.whatif import Policy, SettingChange

EXIT_CODES = """Exit codes: 0 done; 1 unexpected error (serve: a watch did not stop cleanly,
or the stop was forced after 5 s); 2 bad input (a flag, scenario, topology, profile or rules
file, a runs directory that cannot be written); 3 not enough network buffers for the scenario; 4
the job failed; 5 the target cannot be read (no such process or Flink job, ptrace denied, py-spy
failed, Flink unreachable, or the job ended before its first burst); 6 a stored report or the
history is unreadable, cannot be written or is busy (nothing stored is lost); 7 the report was
printed but could not be saved; 130 interrupted (the job was stopped cleanly)."""


class _BpmonGroup(PlainGroup):
    """The ``bpmon`` group: a Ctrl-C before a command's own handler (``errors_as_exit_codes``)
    runs, while the arguments are parsed or --help is shown, also ends with one line and exit code
    130 (typer would exit 130 silently)."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _interrupt_said():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _interrupt_said():
            return super().invoke(ctx)


@contextmanager
def _interrupt_said() -> Iterator[None]:
    """A Ctrl-C as :data:`~bpmon.cli.INTERRUPTED` on stderr and exit code 130."""
    try:
        yield
    except KeyboardInterrupt:
        typer.echo(INTERRUPTED, err=True)
        raise typer.Exit(130) from None


app = typer.Typer(
    cls=_BpmonGroup,
    name="bpmon",
    help="Find where a streaming pipeline is backpressured, and why.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Format = Literal["text", "md", "json"]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(bpmon.__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="A folder with your own rules/ and collectors/ files, looked up before "
            "bpmon's (default: $BPMON_DATA_DIR).",
        ),
    ] = None,
) -> None:
    """Find where a streaming pipeline is backpressured, and why."""
    with errors_as_exit_codes():
        # the model's own setter, which bpmon.service.facade.use_data_dir wraps: this runs
        # before every command, `bpmon COMMAND -h` included, which must not import the service
        from bpmon.model.datafiles import set_data_dir

        set_data_dir(data_dir)


@app.command()
def version() -> None:
    """Print bpmon's version."""
    typer.echo(bpmon.__version__)


@app.command()
def docs(
    name: Annotated[
        str, typer.Argument(help="scenario, topology, report (or any other of bpmon's docs).")
    ],
) -> None:
    """Print one of bpmon's format documents (Markdown), as installed with it."""
    with errors_as_exit_codes():
        from bpmon.service.facade import format_doc

        typer.echo(format_doc(name), nl=False)


@app.command()
def examples(
    json_out: Annotated[
        bool, typer.Option("--json", help='Print JSON: [{"name", "job", "shows"}].')
    ] = False,
) -> None:
    """List the example scenarios bpmon ships, each with its job's name and the diagnosis it
    shows (run one with `bpmon run NAME`)."""
    with errors_as_exit_codes():
        from rich.console import Console

        from bpmon.render.listing import examples_json, examples_table
        from bpmon.service.scenarios import shipped_example, shipped_examples

        found = [shipped_example(name) for name in shipped_examples()]
        if json_out:
            typer.echo(examples_json(found))
        else:
            console = Console()
            console.print(examples_table(found, console.width))


@app.command()
def run(
    scenario: Annotated[str, typer.Argument(help="A scenario file, or a shipped example's name.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    duration: Annotated[
        float | None, typer.Option(help="Seconds the job runs (default: the file's duration_s).")
    ] = None,
    bursts: Annotated[int, typer.Option(help="Monitoring windows to sample.")] = 1,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Apply bpmon's recommendation (the parallelism it names), re-run, and say "
            "whether the backpressure is gone.",
        ),
    ] = False,
    follow: Follow = None,
    steps: Steps = 1,
    observe: Annotated[
        str,
        typer.Option(
            metavar="TARGET",
            help="Diagnose from only what this target would show of the job: runtime (all), "
            "flink (its REST API and samples: no per-channel or spill figures) or pyspy "
            "(stacks alone).",
        ),
    ] = "runtime",
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
    rules: RulesFile = None,
    autoscaler_config: AutoscalerFile = None,
) -> None:
    """Run a scenario on bpmon's runtime, watch it, and name the root cause of backpressure.

    Shows a live table per vertex while the job runs, samples `--bursts` windows after the
    scenario's warm-up, then prints the report (also saved under --runs-dir/RUN_ID/).
    """
    with errors_as_exit_codes():
        from rich.console import Console

        from bpmon.render.report import render_text
        from bpmon.service.facade import Settings, run_scenario
        from bpmon.service.scenarios import resolve_scenario
        from bpmon.service.whatif import follow_changes

        settings = Settings(runs_dir=runs_dir, rules_path=rules, autoscaler_path=autoscaler_config)
        if bursts < 1:
            raise ConfigError(f"--bursts {bursts}: sample at least 1 window")
        policy = _policy(follow or "bpmon")
        plan = _Steps(policy, _steps(steps), duration, observe)
        verify = verify or follow is not None or steps > 1  # either asks for the re-runs
        loaded = resolve_scenario(scenario)
        events = run_scenario(loaded, settings, bursts=bursts, duration_s=duration, observe=observe)
        if not verify:
            _show_watch(events, loaded.name, json_out)
            return
        view = Console(stderr=json_out)
        first = _watched(events, loaded.name, view)
        report = first.reports[-1]
        if not follow_changes(report, policy):
            if not json_out:
                render_text(report, view)
            _say_saved(first, json_out)
            whose = "the report" if policy == "bpmon" else "the autoscaler's decision"
            raise ConfigError(f"--verify: {whose} recommends no parallelism to try")
        _follow(loaded, settings, report, plan, json_out, view)


@app.command()
def plan(
    scenario: Annotated[str, typer.Argument(help="A scenario file, or a shipped example's name.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Show how a scenario is scheduled: pipelined regions, slot sharing groups, slots, memory.

    Nothing runs: this is the job graph as the runtime compiles it (docs/scenario.md).
    """
    with errors_as_exit_codes():
        from rich.console import Console

        from bpmon.service.scenarios import job_plan, plan_lines, plan_to_dict

        compiled = job_plan(scenario)
        if json_out:
            typer.echo(json.dumps(plan_to_dict(compiled), indent=2))
        else:
            typer.echo("\n".join(wrapped(plan_lines(compiled), Console().width)))


@app.command()
def demo(runs_dir: RunsDir = DEFAULT_RUNS_DIR, rules: RulesFile = None) -> None:
    """Run the built-in demo scenario: a chain with one clear bottleneck, and its diagnosis."""
    with errors_as_exit_codes():
        from bpmon.service.facade import Settings, run_scenario
        from bpmon.service.scenarios import resolve_scenario

        settings = Settings(runs_dir=runs_dir, rules_path=rules)
        events = run_scenario(resolve_scenario("demo"), settings)
        _show_watch(events, "demo", json_out=False)


@app.command()
def diagnose(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="A run id, run directory or file.")],
    output: Annotated[
        str, typer.Option("--format", help="text, md or json.", case_sensitive=False)
    ] = "text",
    burst: Annotated[
        int, typer.Option(help="Which burst of the run (0 is the first; see `bpmon history RUN`).")
    ] = 0,
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
) -> None:
    """Render a saved report again."""
    with errors_as_exit_codes():
        from bpmon.service.facade import Settings, load_report

        if burst < 0:
            raise ConfigError(f"--burst {burst}: expected 0 or more")
        report = load_report(run_ref, Settings(runs_dir=runs_dir), burst=burst)
        _print_report(report, _format(output))


@app.command()
def whatif(
    scenario: Annotated[str, typer.Argument(help="A scenario file, or a shipped example's name.")],
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="VERTEX.KEY=VALUE",
            help="A change to try, e.g. enrich.parallelism=6 (repeat for several); keys: "
            "parallelism, cost_us, rate, record_bytes, fanout, selectivity, "
            "managed_memory (a weight), state_mb, spill_cost_us, and checkpoints.* and "
            "network.* (README).",
        ),
    ] = None,
    follow: Follow = None,
    steps: Steps = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Print both reports as JSON.")] = False,
    duration: Annotated[
        float | None, typer.Option(help="Seconds each job runs (default: the file's duration_s).")
    ] = None,
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
    rules: RulesFile = None,
    autoscaler_config: AutoscalerFile = None,
) -> None:
    """Run a scenario as written and as changed, and show both diagnoses side by side."""
    with errors_as_exit_codes():
        from rich.console import Console

        from bpmon.service.facade import Settings, run_scenario
        from bpmon.service.scenarios import resolve_scenario
        from bpmon.service.whatif import changed, parse_change

        settings = Settings(runs_dir=runs_dir, rules_path=rules, autoscaler_path=autoscaler_config)
        if bool(sets) == (follow is not None):
            raise ConfigError("bpmon whatif: pass --set VERTEX.KEY=VALUE or --follow POLICY")
        policy = _policy(follow or "bpmon")
        loaded = resolve_scenario(scenario)
        changes = [parse_change(text) for text in sets or ()]
        if changes:
            changed(loaded, changes)  # a bad change fails here, before anything runs
        plan = _Steps(policy, _steps(steps), duration, "runtime", first=tuple(changes))
        view = Console(stderr=json_out)
        first = _watched(run_scenario(loaded, settings, duration_s=duration), loaded.name, view)
        _follow(loaded, settings, first.reports[-1], plan, json_out, view)


@dataclass(frozen=True, slots=True)
class _Steps:
    """How a what-if goes on: whose recommendation it follows, for how many steps, how each
    job runs, and the changes of the first step when they are given (``--set``)."""

    policy: Policy
    steps: int
    duration: float | None
    observe: str
    first: tuple[SettingChange, ...] = ()


def _policy(name: str) -> Policy:
    from bpmon.service.whatif import POLICIES

    if name not in POLICIES:
        raise ConfigError(f"--follow {name}: expected one of {', '.join(POLICIES)}")
    return name


def _steps(steps: int) -> int:
    if not 1 <= steps <= MAX_STEPS:
        raise ConfigError(f"--steps {steps}: from 1 to {MAX_STEPS}")
    return steps


def _follow(
    loaded: Scenario,
    settings: Settings,
    report: Report,
    plan: _Steps,
    json_out: bool,
    view: Console,
) -> None:
    """Follow ``plan`` on the runtime: each step's changes all applied to the scenario as
    written, and the changed job run again (:func:`_step`)."""
    from bpmon.service.facade import run_scenario
    from bpmon.service.whatif import changed, runtime_saturated

    def rerun(applied: list[SettingChange]) -> Report:
        again = changed(loaded, applied)
        _say_rerouted(loaded, again, view)
        label = ", ".join(map(str, applied))

        def once() -> Report:
            events = run_scenario(again, settings, duration_s=plan.duration, observe=plan.observe)
            return _watched(events, label, view).reports[-1]

        for _ in range(SATURATED_TRIES - 1):
            report = once()
            if not runtime_saturated(report):
                return report
            view.print(
                "the runtime was saturated in that run (its figures describe the machine, not "
                "the job): running it again",
                highlight=False,
            )
        return once()

    _step(report, plan, rerun, json_out, view)


def _step(
    report: Report,
    plan: _Steps,
    rerun: Callable[[list[SettingChange]], Report],
    json_out: bool,
    view: Console,
) -> None:
    """Apply the first step's changes (or the policy's), re-run, compare; then again from the
    new report, up to ``plan.steps`` times or until the backpressure is gone. A step's changes
    go on top of the earlier ones: ``rerun`` gets them all and gives the new report."""
    from bpmon.model.report_json import json_text
    from bpmon.service.whatif import follow_changes, merged, nothing_to_follow, runtime_saturated

    applied: list[SettingChange] = []
    documents: list[object] = []
    for step in range(1, plan.steps + 1):
        changes = (
            list(plan.first) if step == 1 and plan.first else follow_changes(report, plan.policy)
        )
        if not changes:
            view.print(f"step {step}: {nothing_to_follow(report, plan.policy)}", highlight=False)
            break
        applied = merged(applied, changes)
        after = rerun(applied)
        if plan.steps > 1 and not json_out:
            view.print(f"Step {step} ({plan.policy})", style="bold", highlight=False)
        removed, document = _show_comparison(report, after, changes, json_out, view, plan.steps > 1)
        if document is not None:
            documents.append(document)
        report = after
        if removed:
            break
        if runtime_saturated(after) and step < plan.steps:
            view.print(
                f"step {step}: its re-run was saturated every time, so no step follows from it",
                highlight=False,
            )
            break
    if json_out and plan.steps > 1:
        typer.echo(json_text({"policy": plan.policy, "steps": documents}))


SATURATED_TRIES = 3
"""Runs of one what-if step while its window is runtime-saturated (a busy machine): a step
cannot be judged on figures that describe the Python process, so it is run again, as
``bpmon run --verify`` users would by hand; the third is taken as it is."""


MAX_STEPS = 5
"""The most re-runs a what-if follows a policy for (DS2 converges in three)."""


def _say_rerouted(before: Scenario, after: Scenario, view: Console) -> None:
    from bpmon.service.whatif import rerouted

    if moved := rerouted(before, after):
        view.print(
            f"{', '.join(moved)}: forward becomes rebalance in the changed job (Flink keeps "
            "forward only between equal parallelisms)",
            highlight=False,
        )


def _show_comparison(
    before: Report,
    after: Report,
    changes: list[SettingChange],
    json_out: bool,
    view: Console,
    keep: bool = False,
) -> tuple[bool, object | None]:
    """Show one step: the table and the verdict, or its JSON (printed, or returned with
    ``keep``); whether the backpressure is gone with room to spare."""
    from bpmon.model.report_json import comparison_to_dict, comparison_to_json
    from bpmon.render.report import render_comparison
    from bpmon.service.whatif import verdict

    result = verdict(before, after, changes)
    clear = result.removed and not result.at_edge
    if json_out:
        texts = [str(c) for c in changes]
        if keep:
            return clear, comparison_to_dict(before, after, texts, result.removed, result.at_edge)
        typer.echo(comparison_to_json(before, after, texts, result.removed, at_edge=result.at_edge))
        return clear, None
    render_comparison(before, after, ", ".join(str(c) for c in changes), view)
    mark = "✓" if clear else "!" if result.removed else "✗"
    view.print(
        f"{mark} backpressure {result.summary}",
        style="green" if clear else "yellow",
        highlight=False,
    )
    return clear, None


@app.command()
def monitor(
    pid: Annotated[int | None, typer.Option("--pid", help="The Python process to watch.")] = None,
    flink: Annotated[
        str | None,
        typer.Option(
            "--flink", metavar="URL", help="A Flink JobManager's REST address to watch a job of."
        ),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option("--job", metavar="ID|NAME", help="The Flink job (default: the only running)."),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="Collector profile name or file (python-queue, flink-jvm)."),
    ] = None,
    topology: Annotated[
        str | None, typer.Option(help="Topology file: which stage feeds which.")
    ] = None,
    samples: Annotated[int, typer.Option(help="Stack samples to take.")] = 100,
    interval_ms: Annotated[
        float,
        typer.Option("--interval-ms", metavar="MS", help="Milliseconds between two samples."),
    ] = 50.0,
    pause: Annotated[bool, typer.Option(help="Pause the target while sampling.")] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="With --flink: bring the job to the parallelism bpmon recommends (through "
            "Flink's adaptive scheduler, or wait for your own rescale), diagnose it again and "
            "say whether the backpressure is gone.",
        ),
    ] = False,
    verify_timeout: Annotated[
        float,
        typer.Option(
            "--verify-timeout",
            metavar="SECONDS",
            help="With --verify: how long to wait for the job to run at that parallelism.",
        ),
    ] = 300.0,
    follow: Follow = None,
    steps: Steps = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
    rules: RulesFile = None,
    autoscaler_config: AutoscalerFile = None,
) -> None:
    """Diagnose a Python process (--pid, sampled with py-spy) or a Flink job (--flink).

    A Flink job is read over its REST API: job graph, per-subtask metrics, task managers'
    thread dumps as stack samples, and Flink's own backpressure levels as a cross-check.
    """
    with errors_as_exit_codes():
        from bpmon.service.facade import Settings, monitor_flink, monitor_process

        settings = Settings(runs_dir=runs_dir, rules_path=rules, autoscaler_path=autoscaler_config)
        if (pid is None) == (flink is None):
            raise ConfigError("bpmon monitor: pass either --pid PID or --flink URL (one of them)")
        if flink is not None:
            if topology is not None or pause:
                raise ConfigError("--topology and --pause are for --pid; a Flink job has its own")
            policy = _policy(follow or "bpmon")
            plan = _Steps(policy, _steps(steps), None, "flink")
            verify = verify or follow is not None or steps > 1  # either asks for the rescales

            def watched(which: str | None) -> Iterator[WatchEvent]:
                return monitor_flink(
                    flink,
                    job=which,
                    collector_profile=profile or "flink-jvm",
                    samples=samples,
                    interval_ms=interval_ms,
                    settings=settings,
                )

            if verify:
                _verify_flink(flink, job, watched, verify_timeout, json_out, plan)
            else:
                _show_watch(watched(job), f"Flink job at {flink}", json_out)
            return
        for flag, given in (("--verify", verify), ("--follow", follow), ("--steps", steps != 1)):
            if given:
                raise ConfigError(f"{flag} is for --flink (a Python process is not rescaled)")
        if job is not None:
            raise ConfigError("--job is for --flink; with --pid the process is the job")
        assert pid is not None
        events = monitor_process(
            pid,
            collector_profile=profile or "python-queue",
            topology=topology,
            samples=samples,
            interval_ms=interval_ms,
            pause=pause,
            settings=settings,
        )
        _show_watch(events, f"pid {pid}", json_out)


@app.command()
def serve(
    host: Annotated[
        str,
        typer.Option(help="Address to listen on; beyond loopback a token is required."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free one).")] = 8484,
    run_: Annotated[
        list[str] | None,
        typer.Option(
            "--run", metavar="SCENARIO", help="Watch a scenario (file or example); repeatable."
        ),
    ] = None,
    monitor_pid: Annotated[
        int | None, typer.Option("--monitor-pid", metavar="PID", help="Watch a Python process.")
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="Collector profile for --monitor-pid (python-queue).")
    ] = None,
    topology: Annotated[str | None, typer.Option(help="Topology file for --monitor-pid.")] = None,
    monitor_flink: Annotated[
        list[str] | None,
        typer.Option(
            "--monitor-flink",
            metavar="URL",
            help="Watch every running job of the Flink cluster at URL (REST), and each job "
            "submitted later; repeatable (then each job's name says its cluster).",
        ),
    ] = None,
    flink_job: Annotated[
        str | None,
        typer.Option(
            "--flink-job",
            metavar="ID|NAME",
            help="Only the jobs of this id or name for --monitor-flink (default: every one).",
        ),
    ] = None,
    every: Annotated[float, typer.Option(help="Seconds between bursts of a watched job.")] = 10.0,
    stuck_after: Annotated[
        float,
        typer.Option(
            "--stuck-after",
            metavar="SECONDS",
            help="A watch that shows no sign of life this long is stuck: /healthz answers 503.",
        ),
    ] = STUCK_AFTER_S,
    token_file: Annotated[
        Path | None,
        typer.Option(help="File holding the bearer token every request must carry."),
    ] = None,
    metrics_public: Annotated[
        bool, typer.Option("--metrics-public", help="Serve /metrics without the token.")
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="NAME",
            help="Also answer requests whose Host is NAME (the name Prometheus or a browser "
            "uses); repeatable. Always answered: localhost, loopback addresses and the --host "
            "address. With a token on 0.0.0.0 or ::, any Host is answered unless this is given.",
        ),
    ] = None,
    certfile: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Serve HTTPS with this PEM certificate (chain)."),
    ] = None,
    keyfile: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="The unencrypted PEM key of --certfile."),
    ] = None,
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
    rules: RulesFile = None,
    autoscaler_config: AutoscalerFile = None,
) -> None:
    """Serve the HTTP API, Flink's backpressure endpoint and Prometheus /metrics.

    Watches the --run scenarios, the --monitor-pid process and every running
    job of each --monitor-flink cluster (a job submitted later too, checked
    every --every seconds), a burst every --every seconds, and serves every
    run in --runs-dir. API docs: /docs and /redoc (no CDN needed).

    Access: a token comes from --token-file or $BPMON_TOKEN. /healthz needs
    none and names jobs only to a caller with it (503 while a watch is
    stuck). A request whose Host is not answered gets 421 (a guard against
    DNS rebinding): add names with --allow-host.

    Stop: Ctrl-C or SIGTERM stops every watched job; the process is gone
    within 5 s whatever its threads do. Past that, or at a second signal,
    it prints every thread's stack and exits 1.

    Exit codes: 0 stopped cleanly; 1 something did not stop cleanly, or the
    stop was forced; 2 bad set-up (one line, nothing started); 5 a target to
    watch cannot be read (a Flink cluster that does not answer, no such PID);
    130 stopped while the watches were starting.
    """
    with errors_as_exit_codes():
        _serve(
            host=host,
            port=port,
            runs_dir=runs_dir,
            rules_path=rules,
            autoscaler_path=autoscaler_config,
            scenarios=tuple(run_ or ()),
            monitor_pid=monitor_pid,
            profile=profile,
            topology=topology,
            monitor_flink=tuple(monitor_flink or ()),
            flink_job=flink_job,
            every_s=every,
            stuck_after_s=stuck_after,
            token_file=token_file,
            metrics_public=metrics_public,
            allow_hosts=tuple(allow_host or ()),
            certfile=certfile,
            keyfile=keyfile,
        )


def _serve(**flags: Any) -> None:
    """Run the server (the web extra imported only now); report what did not stop cleanly."""
    try:
        from bpmon.web.launch import ServeOptions
        from bpmon.web.launch import serve as serve_forever
    except ImportError as exc:
        raise ConfigError(
            f"bpmon serve needs the web extra ({exc.name} is missing): pip install 'bpmon[web]'"
        ) from None
    leaks = serve_forever(ServeOptions(**flags), announce=lambda line: typer.echo(line, err=True))
    if leaks:
        typer.echo(f"bpmon: warning: not everything ended cleanly: {'; '.join(leaks)}", err=True)
        raise typer.Exit(1)
    typer.echo("bpmon: stopped; every watched job ended cleanly", err=True)


# -- watching -----------------------------------------------------------------------------------


def _show_watch(events: Iterator[WatchEvent], title: str, json_out: bool) -> None:
    """Consume a watch's events: a live view on the terminal, then the reports."""
    from rich.console import Console

    from bpmon.model.report_json import reports_to_json
    from bpmon.render.report import render_text

    view = Console(stderr=json_out)
    ended = _watched(events, title, view)
    if json_out:
        typer.echo(reports_to_json(ended.reports))
    else:
        for report in ended.reports:
            render_text(report, view)
    _say_saved(ended, json_out)


def _verify_flink(
    url: str,
    job: str | None,
    watched: Callable[[str | None], Iterator[WatchEvent]],
    timeout_s: float,
    json_out: bool,
    plan: _Steps | None = None,
) -> None:
    """Diagnose, bring the job to the parallelism the policy names (bpmon's recommendation, or
    the autoscaler's decision from the same window, a scale-down included), diagnose again,
    compare; then again from the new report, up to ``plan.steps`` times or until the
    backpressure is gone. Each step's parallelism goes on top of the earlier steps' (the
    vertices rescaled before are asked for again at theirs), through the same rescale
    (:func:`~bpmon.service.facade.rescale_flink`) as ``--verify``."""
    from rich.console import Console

    from bpmon.render.report import render_text
    from bpmon.service.facade import rescale_flink
    from bpmon.service.whatif import follow_changes

    plan = plan or _Steps("bpmon", 1, None, "flink")
    view = Console(stderr=json_out)
    first = _watched(watched(job), f"Flink job at {url}", view)
    report = first.reports[-1]
    if not follow_changes(report, plan.policy):
        if not json_out:
            render_text(report, view)
        _say_saved(first, json_out)
        whose = "the report" if plan.policy == "bpmon" else "the autoscaler's decision"
        raise ConfigError(f"--verify: {whose} recommends no parallelism to try")
    running = [job or report.job]

    def rerun(applied: list[SettingChange]) -> Report:
        wanted = {c.vertex: int(c.value) for c in applied}
        running.append(rescale_flink(url, running[-1], wanted, say=view.print, timeout_s=timeout_s))
        return _watched(watched(running[-1]), ", ".join(map(str, applied)), view).reports[-1]

    _step(report, plan, rerun, json_out, view)


def _watched(events: Iterator[WatchEvent], title: str, view: Console) -> JobEnded:
    """Run a watch to its end under a live view; JobError if the job failed."""
    from bpmon.model.events import JobEnded, JobFailed, LiveSnapshot
    from bpmon.render.liveview import LiveView

    live = LiveView(view, title)
    ended: JobEnded | None = None
    try:
        with live:
            for event in events:
                if isinstance(event, LiveSnapshot):
                    live.update(event)
                elif isinstance(event, JobEnded):
                    ended = event
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()  # a Ctrl-C mid-watch: stop the job now, every thread and buffer back
    if ended is None:  # the service always ends a watch with JobEnded: a bug otherwise
        raise BpmonError("the watch ended without a final event")
    if ended.leaks:
        leaks = "; ".join(ended.leaks)
        typer.echo(f"bpmon: warning: the job did not end cleanly: {leaks}", err=True)
    if isinstance(ended, JobFailed):
        kept = (
            f"; {len(ended.reports)} burst(s) kept as run {ended.run_id}" if ended.reports else ""
        )
        raise JobError(f"{ended.error}{kept}")
    if ended.reason is not None and ended.bursts == 0:
        raise JobOverError(f"{ended.reason} before its first burst: nothing was diagnosed")
    if ended.reason is not None:
        typer.echo(f"bpmon: {ended.reason}; {ended.bursts} burst(s) taken before", err=True)
    return ended


def _say_saved(ended: JobEnded, json_out: bool) -> None:
    """Where the run was saved; SaveError (exit 7) when a report could not be, after it was
    printed."""
    if ended.paths:
        folder = ended.paths[0].parent
        typer.echo(
            f"run {ended.run_id}: saved in {folder}; `bpmon diagnose {ended.run_id}` shows it "
            "again",
            err=json_out,
        )
    if ended.unsaved:
        raise SaveError(
            f"{ended.unsaved} report(s) printed above could not be saved: {ended.save_errors[0]}"
        )


# -- output -------------------------------------------------------------------------------------


def wrapped(lines: list[str], width: int) -> Iterator[str]:
    """``lines`` wrapped at ``width`` between words, each continuation indented under its
    line's text plus four, so a long line still reads as one item."""
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        yield from textwrap.wrap(
            line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        ) or [""]


def _format(value: str) -> Format:
    lowered = value.lower()
    if lowered == "markdown":
        lowered = "md"
    if lowered not in ("text", "md", "json"):
        raise ConfigError(f"--format {value!r}: expected text, md or json")
    return lowered  # type: ignore[return-value]


def _print_report(report: Report, output: Format) -> None:
    from rich.console import Console

    from bpmon.render.report import render_json, render_markdown, render_text

    if output == "json":
        typer.echo(render_json(report))
    elif output == "md":
        typer.echo(render_markdown(report))
    else:
        render_text(report, Console())


# -- the history and its analysis (bpmon/cli/history.py) ----------------------------------------

app.add_typer(history_app, name="history")
app.command()(analyze)
use_plain_help(app, history_app)


def main() -> None:
    """Entry point of the ``bpmon`` script: a usage error is one line too, with exit code 2."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # typer's usage errors: a bad flag, a missing argument
        ctx = getattr(exc, "ctx", None)
        where = getattr(ctx, "command_path", None) or "bpmon"
        message = " ".join(exc.format_message().split()).rstrip(".")
        typer.echo(f"bpmon: error: {message}; see `{where} --help`", err=True)
        sys.exit(2 if exc.exit_code == 1 else exc.exit_code)
    except typer.Abort:  # a Ctrl-C before a command's own handler (errors_as_exit_codes) ran
        typer.echo(INTERRUPTED, err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
