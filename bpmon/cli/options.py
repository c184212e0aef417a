"""What every ``bpmon`` command shares: the ``--runs-dir`` and ``--rules`` options and how an error
ends a command (one line on stderr and an exit code).

``commands.py`` and ``history.py`` both take these from here, so neither imports the other's
helpers.

It imports typer and :mod:`bpmon.model.errors`, nothing heavier: every command's options are
built from this module when ``bpmon`` starts, ``bpmon --version`` and ``bpmon -h`` included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from bpmon.model.errors import BpmonError

# The service's defaults an option shows, repeated here: a default is evaluated when the command is
# defined, and defining the commands (for --version or -h) must not import the service.
# tests/cli/test_startup.py checks that each still equals the service's own.
DEFAULT_RUNS_DIR = Path("bpmon-runs")
"""bpmon.service.settings.DEFAULT_RUNS_DIR: where run reports are kept unless told."""
DEFAULT_MASTER = "local[*]"
"""bpmon.service.history.DEFAULT_MASTER: the Spark master ``bpmon analyze`` uses unless told."""
STUCK_AFTER_S = 60.0
"""bpmon.service.watching.STUCK_AFTER_S: ``bpmon serve --stuck-after``'s default."""

RunsDir = Annotated[
    Path,
    typer.Option("--runs-dir", envvar="BPMON_RUNS_DIR", help="Where run reports are kept."),
]
AutoscalerFile = Annotated[
    Path | None,
    typer.Option(
        "--autoscaler-config",
        envvar="BPMON_AUTOSCALER_CONFIG",
        metavar="FILE",
        help="job.autoscaler.* options (Flink configuration lines) for the report's autoscaler "
        "opinion (default: the autoscaler's own defaults; docs/autoscaler.md).",
    ),
]
Follow = Annotated[
    str | None,
    typer.Option(
        "--follow",
        metavar="POLICY",
        help="Whose recommendation the re-run applies: bpmon (its sized causes, the default) or "
        "autoscaler (what Flink's autoscaler would decide from the same window).",
    ),
]
Steps = Annotated[
    int,
    typer.Option(
        "--steps",
        metavar="N",
        help="Repeat diagnose, apply, re-run up to N times (1 to 5), each step from the last "
        "re-run's report, until the backpressure is gone.",
    ),
]
RulesFile = Annotated[
    Path | None,
    typer.Option(
        "--rules",
        envvar="BPMON_RULES",
        help="A rules file to diagnose with (default: the shipped rules/backpressure.toml).",
    ),
]


@contextmanager
def errors_as_exit_codes() -> Iterator[None]:
    """Turn bpmon's errors into one line and an exit code; Ctrl-C into exit code 130."""
    try:
        yield
    except BpmonError as exc:
        typer.echo(f"bpmon: error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("bpmon: interrupted; the job was stopped cleanly", err=True)
        raise typer.Exit(130) from None
