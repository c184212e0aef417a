"""The ``bpmon`` command line: a surface over :mod:`bpmon.service`.

Every expected error is a :class:`bpmon.errors.BpmonError`, printed as one line on stderr with its
exit code; a traceback is a bug. Ctrl-C stops a running job cleanly (exit code 130).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

import bpmon
from bpmon.errors import BpmonError, ConfigError
from bpmon.model import Report
from bpmon.render import render_json, render_markdown, render_text
from bpmon.report_json import report_to_dict
from bpmon.runtime.metrics import TaskMetrics
from bpmon.service import (
    DEFAULT_RUNS_DIR,
    RunSession,
    Settings,
    load_report,
    monitor_process,
    resolve_scenario,
    shipped_examples,
)

app = typer.Typer(
    name="bpmon",
    help="Find where a streaming pipeline is backpressured, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

RunsDir = Annotated[
    Path,
    typer.Option("--runs-dir", envvar="BPMON_RUNS_DIR", help="Where run reports are kept."),
]
Format = Literal["text", "md", "json"]


@contextmanager
def _errors() -> Iterator[None]:
    """Turn bpmon's errors into one line and an exit code; Ctrl-C into exit code 130."""
    try:
        yield
    except BpmonError as exc:
        typer.echo(f"bpmon: error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("bpmon: interrupted; the job was stopped cleanly", err=True)
        raise typer.Exit(130) from None


@app.callback()
def _root() -> None:
    """Find where a streaming pipeline is backpressured, and why."""


@app.command()
def version() -> None:
    """Print bpmon's version."""
    typer.echo(bpmon.__version__)


@app.command()
def examples() -> None:
    """List the example scenarios bpmon ships (run one with `bpmon run NAME`)."""
    for name in shipped_examples():
        typer.echo(name)


@app.command()
def run(
    scenario: Annotated[str, typer.Argument(help="A scenario file, or a shipped example's name.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    duration: Annotated[
        float | None, typer.Option(help="Seconds the job runs (default: the file's duration_s).")
    ] = None,
    bursts: Annotated[int, typer.Option(help="Monitoring windows to sample.")] = 1,
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
) -> None:
    """Run a scenario on bpmon's runtime, watch it, and name the root cause of backpressure.

    Shows a live table per vertex while the job runs, samples `--bursts` windows after the
    scenario's warm-up, then prints the report (also saved under --runs-dir/RUN_ID/).
    """
    with _errors():
        _run(scenario, json_out=json_out, duration=duration, bursts=bursts, runs_dir=runs_dir)


@app.command()
def demo(runs_dir: RunsDir = DEFAULT_RUNS_DIR) -> None:
    """Run the built-in demo scenario: a chain with one clear bottleneck, and its diagnosis."""
    with _errors():
        _run("demo", json_out=False, duration=None, bursts=1, runs_dir=runs_dir)


@app.command()
def diagnose(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="A run id, run directory or file.")],
    output: Annotated[
        str, typer.Option("--format", help="text, md or json.", case_sensitive=False)
    ] = "text",
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
) -> None:
    """Render a saved report again."""
    with _errors():
        report = load_report(run_ref, Settings(runs_dir=runs_dir))
        _print_report(report, _format(output))


@app.command()
def monitor(
    pid: Annotated[int, typer.Option("--pid", help="The process to watch.")],
    profile: Annotated[str, typer.Option(help="Collector profile name or file.")] = "python-queue",
    topology: Annotated[
        str | None, typer.Option(help="Topology file: which stage feeds which.")
    ] = None,
    samples: Annotated[int, typer.Option(help="Stack samples to take.")] = 100,
    interval_ms: Annotated[float, typer.Option("--interval-ms")] = 50.0,
    pause: Annotated[bool, typer.Option(help="Pause the target while sampling.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    runs_dir: RunsDir = DEFAULT_RUNS_DIR,
) -> None:
    """Diagnose a Python process bpmon did not start, sampling its threads with py-spy."""
    with _errors():
        err = Console(stderr=True)
        with _progress_bar(err, "sampling", samples) as advance:
            report = monitor_process(
                pid,
                profile=profile,
                topology=topology,
                samples=samples,
                interval_ms=interval_ms,
                pause=pause,
                settings=Settings(runs_dir=runs_dir),
                progress=advance,
            )
        _print_report(report, "json" if json_out else "text")


# -- run ----------------------------------------------------------------------------------------


def _run(
    scenario: str, *, json_out: bool, duration: float | None, bursts: int, runs_dir: Path
) -> None:
    if bursts < 1:
        raise ConfigError(f"--bursts {bursts}: sample at least 1 window")
    loaded = resolve_scenario(scenario)
    if duration is not None and duration <= 0:
        raise ConfigError(f"--duration {duration}: must be a positive number of seconds")
    session = RunSession(loaded, Settings(runs_dir=runs_dir))
    monitor = loaded.monitor
    burst_s = monitor.samples * monitor.interval_ms / 1000
    planned = max(duration or loaded.duration_s, monitor.warmup_s + bursts * burst_s)
    view = Console(stderr=json_out)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeRemainingColumn(),
        console=view,
        transient=True,
    )
    task_id = progress.add_task("warming up", total=monitor.samples, start=False)
    try:
        session.start()
        with Live(
            _live_view(session, progress),
            console=view,
            refresh_per_second=4,
            transient=not view.is_terminal,
        ) as live:

            def refresh() -> None:
                live.update(_live_view(session, progress))

            _sleep_with(session, monitor.warmup_s, refresh)
            for n in range(bursts):
                progress.reset(
                    task_id, total=monitor.samples, description=f"sampling {n + 1}/{bursts}"
                )
                progress.start_task(task_id)

                def advance(done: int, total: int) -> None:
                    progress.update(task_id, completed=done, total=total)
                    if done % 5 == 0:  # the table every 5 samples: it costs the sampler time
                        refresh()

                session.burst(advance)
            remaining = planned - session.job.elapsed_s
            progress.update(task_id, visible=False)
            _sleep_with(session, remaining, refresh)
    finally:
        result = session.stop()
    _finish_run(session, result.leaks, json_out, view)


def _sleep_with(session: RunSession, seconds: float, refresh: Callable[[], None]) -> None:
    deadline = time.monotonic() + max(0.0, seconds)
    while (left := deadline - time.monotonic()) > 0:
        session.wait(min(0.25, left))
        refresh()


def _finish_run(session: RunSession, leaks: tuple[str, ...], json_out: bool, view: Console) -> None:
    reports = session.outcome.reports
    if leaks:
        Console(stderr=True).print(
            f"bpmon: warning: the job did not end cleanly: {'; '.join(leaks)}"
        )
    if json_out:
        docs = [report_to_dict(r) for r in reports]
        typer.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return
    for report in reports:
        render_text(report, view)
    folder = session.outcome.saved[0].parent if session.outcome.saved else None
    view.print(
        f"\nrun {session.run_id}: saved in {folder}; "
        f"`bpmon diagnose {session.run_id}` shows it again",
        highlight=False,
    )


def _live_view(session: RunSession, progress: Progress) -> Group:
    table = Table(
        title=f"{session.scenario.name} — {session.job.elapsed_s:4.1f} s",
        title_justify="left",
        expand=False,
    )
    for column in (
        "vertex",
        "rec in/s",
        "rec out/s",
        "busy",
        "idle",
        "backpr.",
        "outPool",
        "inPool",
    ):
        table.add_column(column, justify="left" if column == "vertex" else "right")
    for vertex, group in session.live_metrics().items():
        table.add_row(vertex, *_vertex_row(group))
    return Group(table, progress)


def _vertex_row(group: list[TaskMetrics]) -> list[str]:
    def most(values: list[float | None]) -> str:
        present = [v for v in values if v is not None]
        return f"{max(present):.2f}" if present else "–"

    bp = max(m.backpressured_ms_per_s for m in group)
    colour = "red" if bp > 500 else "yellow" if bp > 100 else "green"
    return [
        f"{sum(m.records_in_per_s for m in group):,.0f}",
        f"{sum(m.records_out_per_s for m in group):,.0f}",
        f"{max(m.busy_ms_per_s for m in group):.0f} ms/s",
        f"{max(m.idle_ms_per_s for m in group):.0f} ms/s",
        f"[{colour}]{bp:.0f} ms/s[/]",
        most([m.out_pool_usage for m in group]),
        most([m.in_pool_usage for m in group]),
    ]


# -- output -------------------------------------------------------------------------------------


def _format(value: str) -> Format:
    lowered = value.lower()
    if lowered == "markdown":
        lowered = "md"
    if lowered not in ("text", "md", "json"):
        raise ConfigError(f"--format {value!r}: expected text, md or json")
    return lowered  # type: ignore[return-value]


def _print_report(report: Report, output: Format) -> None:
    if output == "json":
        typer.echo(render_json(report))
    elif output == "md":
        typer.echo(render_markdown(report))
    else:
        render_text(report, Console())


@contextmanager
def _progress_bar(console: Console, label: str, total: int) -> Iterator[Callable[[int, int], None]]:
    if not console.is_terminal:  # no bar (not even its blank line) in logs and pipes
        yield lambda done, of: None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        console=console,
        transient=True,
    ) as progress:
        task_id = progress.add_task(label, total=total)
        yield lambda done, of: progress.update(task_id, completed=done, total=of)


def main() -> None:
    """Entry point of the ``bpmon`` script."""
    app()
