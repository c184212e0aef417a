"""``bpmon history`` and ``bpmon analyze``: the runs kept, their Parquet history and its analysis.

``bpmon history`` is a command group that still reads like the single command it was:

    bpmon history [--job J] [--since DATE]     the runs, newest first
    bpmon history RUN                          the bursts of one run
    bpmon history import DIR                   the Parquet history built from report.json folders
    bpmon history synth --runs N --jobs K      a synthetic history (tests, benchmarks)
    bpmon history compact                      the Parquet history's parts merged now
    bpmon history prune [--keep-days N]        days older than keep_days deleted

A word after ``history`` that is not a subcommand is taken as a RUN (:class:`_HistoryGroup`);
run ids start with a timestamp, so none is named ``import``, ``synth``, ``compact`` or
``prune``. Options given before the word (``bpmon history --runs-dir D RUN``) hold for the
subcommand too.

Like :mod:`bpmon.cli.commands`, it imports only typer, the options and the model's errors
when the module is imported (``bpmon -h`` imports it), the rest inside the commands that use
them.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bpmon.cli.help import PlainGroup
from bpmon.cli.options import DEFAULT_MASTER, DEFAULT_RUNS_DIR, RulesFile, errors_as_exit_codes
from bpmon.model.errors import ConfigError, HistoryError

if TYPE_CHECKING:  # the helpers' annotations only: their modules are imported where they are used
    from datetime import datetime

    from bpmon.model.analysis import Analysis
    from bpmon.service.facade import Settings
    from bpmon.service.history import Pruning


class _HistoryGroup(PlainGroup):
    """A group whose unknown first word is the RUN of the hidden ``show`` subcommand."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        # Any: typer's own click types (typer >= 0.17 vendors click); this works with both.
        if args and args[0] not in self.commands:
            return "show", self.commands["show"], args
        return super().resolve_command(ctx, args)


history_app = typer.Typer(
    cls=_HistoryGroup,
    invoke_without_command=True,
    subcommand_metavar="[RUN] | import DIR | synth | compact | prune",
    help="List the stored runs, newest first, or the bursts of one run (`bpmon history RUN`); "
    "`import` and `synth` build the Parquet history `bpmon analyze` reads, `compact` and "
    "`prune` keep it small.",
)

RunsDirOption = Annotated[
    Path | None,
    typer.Option(
        "--runs-dir",
        envvar="BPMON_RUNS_DIR",
        help=f"Where run reports are kept (default {DEFAULT_RUNS_DIR}).",
    ),
]


JsonFlag = Annotated[
    bool,
    typer.Option("--json", help="Print JSON (a list of objects; fields in docs/history.md)."),
]


def _runs_dir(ctx: typer.Context, own: Path | None) -> Path:
    """A subcommand's --runs-dir, else the one given to ``bpmon history``, else the default."""
    if own is not None:
        return own
    parent = ctx.parent.params.get("runs_dir") if ctx.parent is not None else None
    return parent if isinstance(parent, Path) else DEFAULT_RUNS_DIR


def _since(text: str | None, settings: Settings) -> datetime | None:
    from bpmon.service.history import parse_since

    return None if text is None else parse_since(text, settings.now())


@history_app.callback()
def history(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Option(help="Only runs of this job.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only runs started since: 2026-11-01, 2026-11-01T12:00 (UTC), or 7d."),
    ] = None,
    json_out: JsonFlag = False,
    runs_dir: RunsDirOption = None,
) -> None:
    """List the stored runs, newest first, or the bursts of one run (`bpmon history RUN`)."""
    if ctx.invoked_subcommand is not None:
        return
    with errors_as_exit_codes():
        from rich.console import Console

        from bpmon.render.listing import run_started, runs_json, runs_table
        from bpmon.service.facade import Settings, stored_runs

        folder = runs_dir or DEFAULT_RUNS_DIR
        settings = Settings(runs_dir=folder)
        after = _since(since, settings)
        skipped: list[str] = []
        runs = [
            r
            for r in stored_runs(settings, on_corrupt=lambda e: skipped.append(str(e)))
            if (job is None or r.job == job) and (after is None or run_started(r) >= after)
        ]
        for line in skipped:
            typer.echo(f"bpmon: warning: skipped {line}", err=True)
        if json_out:
            typer.echo(runs_json(runs))
            return
        if not runs:
            where = f" of job {job!r}" if job is not None else ""
            when = f" since {after:%Y-%m-%d %H:%M} UTC" if after is not None else ""
            typer.echo(f"no runs{where}{when} in {folder}; `bpmon run demo` makes one")
            return
        console = Console()
        console.print(runs_table(runs, console.width))


@history_app.command("show", hidden=True)
def show(
    ctx: typer.Context,
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="A run id or run directory.")],
    json_out: JsonFlag = False,
    runs_dir: RunsDirOption = None,
) -> None:
    """The bursts of one run."""
    with errors_as_exit_codes():
        from rich.console import Console

        from bpmon.render.listing import bursts_json, bursts_table
        from bpmon.service.facade import Settings, run_bursts

        settings = Settings(runs_dir=_runs_dir(ctx, runs_dir))
        bursts = run_bursts(run_ref, settings)
        parent = ctx.parent.params.get("json_out") if ctx.parent is not None else None
        if json_out or parent is True:
            typer.echo(bursts_json(bursts))
            return
        console = Console()
        console.print(bursts_table(bursts, console.width))


@history_app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        Path, typer.Argument(metavar="DIR", help="A folder of run folders (RUN_ID/report.json).")
    ],
    runs_dir: RunsDirOption = None,
) -> None:
    """Add every report of the run folders in DIR to the Parquet history of --runs-dir.

    Idempotent: a report already in the history is not written again.
    """
    with errors_as_exit_codes():
        from bpmon.service.facade import Settings
        from bpmon.service.history import import_history

        settings = Settings(runs_dir=_runs_dir(ctx, runs_dir))
        result = import_history(source, settings, lambda line: typer.echo(line, err=True))
        for line in result.skipped:
            typer.echo(f"bpmon: warning: skipped {line}", err=True)
        typer.echo(
            f"imported {result.runs:,} run(s) from {source}: {result.added:,} report(s) added, "
            f"{result.present:,} already in {Path(settings.runs_dir) / 'history'}"
        )


@history_app.command("synth")
def synth(
    ctx: typer.Context,
    runs: Annotated[int, typer.Option(help="Runs per job.")] = 10,
    jobs: Annotated[int, typer.Option(help="How many jobs.")] = 2,
    bursts: Annotated[int, typer.Option(help="Windows per run.")] = 3,
    parallelism: Annotated[int, typer.Option(help="Subtasks per vertex.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the noise.")] = 0,
    runs_dir: RunsDirOption = None,
) -> None:
    """Write a synthetic history for tests and benchmarks (every row marked synthetic).

    Jobs synth-job-K, each with a chronic bottleneck, a capacity drop half-way and a hot subtask.
    """
    with errors_as_exit_codes():
        from bpmon.service.facade import Settings
        from bpmon.service.history import synthesize_history

        settings = Settings(runs_dir=_runs_dir(ctx, runs_dir))
        made = synthesize_history(
            settings, runs=runs, jobs=jobs, bursts=bursts, parallelism=parallelism, seed=seed
        )
        typer.echo(
            f"wrote {made.runs - made.present:,} synthetic run(s) ({made.subtask_rows:,} subtask "
            f"rows, {made.cause_rows:,} cause rows; {made.present:,} already there) to "
            f"{Path(settings.runs_dir) / 'history'}: jobs synth-job-1..{jobs}, rows marked "
            "synthetic = true"
        )


@history_app.command("compact")
def compact(ctx: typer.Context, runs_dir: RunsDirOption = None) -> None:
    """Merge the Parquet history's part files now: one per job, day and table.

    Appends already compact as they go (in tiers) and `bpmon serve` compacts past days every
    hour; this merges everything at once, today included. Safe while bpmon writes or reads.
    """
    with errors_as_exit_codes():
        from bpmon.service.facade import Settings
        from bpmon.service.history import compact_history

        settings = Settings(runs_dir=_runs_dir(ctx, runs_dir))
        done = compact_history(settings)
        where = Path(settings.runs_dir) / "history"
        extra = [
            f"{done.temporary:,} leftover temporary file(s) removed" if done.temporary else "",
            f"{done.deferred:,} replaced part(s) left while a reader reads (never read again)"
            if done.deferred
            else "",
        ]
        typer.echo(
            f"compacted {done.days:,} job-day(s) of {where}: {done.files_before:,} files before, "
            f"{done.files_after:,} after ({done.merged:,} parts merged into {done.written:,})"
            + "".join(f"; {e}" for e in extra if e)
        )
        if done.problems:
            for line in done.problems:
                typer.echo(f"bpmon: error: {line}", err=True)
            raise typer.Exit(HistoryError.exit_code)


@history_app.command("prune")
def prune(
    ctx: typer.Context,
    keep_days: Annotated[
        int | None,
        typer.Option(
            "--keep-days",
            help="Days to keep (0: everything; default: [history] keep_days of the rules, 30).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed, remove nothing.")
    ] = False,
    runs_dir: RunsDirOption = None,
    rules: RulesFile = None,
) -> None:
    """Delete the history older than --keep-days: the Parquet history's days, and the run
    folders and burst reports."""
    with errors_as_exit_codes():
        from bpmon.service.facade import Settings
        from bpmon.service.history import prune_history

        settings = Settings(runs_dir=_runs_dir(ctx, runs_dir), rules_path=rules)
        typer.echo(_pruned(prune_history(settings, keep_days, dry_run=dry_run), settings))


def _pruned(done: Pruning, settings: Settings) -> str:
    """What a prune did, in one line (a dry run: what it would do)."""
    where = Path(settings.runs_dir)
    if done.cutoff is None or done.dataset is None:
        return f"nothing pruned in {where}: keep_days = 0 keeps everything"
    cutoff = f"{done.cutoff:%Y-%m-%d %H:%M} UTC"
    days = done.dataset.days
    listed = ", ".join(f"{d.job} {d.day}" for d in days[:3]) + (" ..." if len(days) > 3 else "")
    dataset = f"{len(days):,} job-day(s) of the Parquet history ({done.dataset.files:,} files)"
    dataset += f": {listed}" if days else ""
    if done.dry_run:
        return (
            f"would remove from {where} what is older than {cutoff} (keep_days {done.keep_days}):"
            f" {dataset}; {done.runs:,} run folder(s) and {done.bursts:,} burst report(s)"
        )
    return (
        f"removed from {where} what is older than {cutoff} (keep_days {done.keep_days}): "
        f"{dataset}; {done.runs:,} run folder(s) and {done.bursts:,} burst report(s)"
    )


ANALYSIS_FORMATS = ("text", "md", "json", "html")
SUFFIXES = {"text": "txt", "md": "md", "json": "json", "html": "html"}


def analyze(
    job: Annotated[str | None, typer.Option(help="Only this job.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only windows since: 2026-11-01, 2026-11-01T12:00 (UTC), or 7d."),
    ] = None,
    master: Annotated[
        str,
        typer.Option(
            envvar="BPMON_SPARK_MASTER",
            help="Spark master: local[*], local[N], spark://HOST:PORT, yarn, k8s://...",
        ),
    ] = DEFAULT_MASTER,
    output: Annotated[
        str, typer.Option("--format", help="text, md, json or html.", case_sensitive=False)
    ] = "text",
    json_out: Annotated[
        bool, typer.Option("--json", help="The same as --format json (docs/history.md).")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Also write the aggregates (Parquet) and the report into this folder."),
    ] = None,
    ui: Annotated[bool, typer.Option("--ui", help="Keep Spark's web UI on (port 4040).")] = False,
    runs_dir: Annotated[
        Path, typer.Option("--runs-dir", envvar="BPMON_RUNS_DIR", help="Where runs are kept.")
    ] = DEFAULT_RUNS_DIR,
    rules: RulesFile = None,
) -> None:
    """Aggregate the history with Spark: chronic bottlenecks, regressions between runs,
    capacity trends and skew per job and vertex."""
    with errors_as_exit_codes():
        from rich.console import Console

        from bpmon.model.analysis import analysis_to_json
        from bpmon.render.analysis import render_analysis_text
        from bpmon.service.facade import Settings
        from bpmon.service.history import analyze_history, write_analysis_tables

        fmt = output.lower().replace("markdown", "md")
        if json_out and fmt not in ("text", "json"):
            raise ConfigError(f"--json and --format {output}: give one of them")
        fmt = "json" if json_out else fmt
        if fmt not in ANALYSIS_FORMATS:
            raise ConfigError(f"--format {output!r}: expected text, md, json or html")
        if fmt == "html" and out is None:
            raise ConfigError("--format html writes a file: give --out DIR (or use --format md)")
        settings = Settings(runs_dir=runs_dir, rules_path=rules)
        analysis = analyze_history(
            settings,
            job=job,
            since=_since(since, settings),
            master=master,
            ui=ui,
            progress=lambda line: typer.echo(f"bpmon: {line}", err=True),
        )
        for line in analysis.skipped:
            typer.echo(f"bpmon: warning: skipped {line}", err=True)
        report = _rendered(analysis, fmt)
        if fmt == "text":
            render_analysis_text(analysis, Console())
        elif fmt != "html":
            typer.echo(report, nl=False)
        if out is not None:
            written = write_analysis_tables(analysis, out)
            target = out / f"analysis.{SUFFIXES[fmt]}"
            target.write_text(report, encoding="utf-8")
            if fmt != "json":
                (out / "analysis.json").write_text(analysis_to_json(analysis) + "\n")
            names = ", ".join(p.name for p in written)
            typer.echo(f"bpmon: wrote {target} and {names} in {out}", err=True)


def _rendered(analysis: Analysis, fmt: str) -> str:
    """The analysis in ``fmt`` as text (the terminal table as plain text for a file)."""
    from rich.console import Console

    from bpmon.model.analysis import analysis_to_json
    from bpmon.render.analysis import render_analysis_markdown, render_analysis_text

    if fmt == "json":
        return analysis_to_json(analysis) + "\n"
    if fmt == "md":
        return render_analysis_markdown(analysis)
    if fmt == "html":
        from bpmon.web.history_html import analysis_html

        return analysis_html(analysis)
    console = Console(record=True, width=160, file=io.StringIO())
    render_analysis_text(analysis, console)
    return console.export_text()
