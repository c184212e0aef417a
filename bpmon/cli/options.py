"""What every ``bpmon`` command shares: the ``--runs-dir`` and ``--rules`` options and how an error
ends a command (one line on stderr and an exit code).

``commands.py`` and ``history.py`` both take these from here, so neither imports the other's
helpers.

May import: the model, typer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from bpmon.model.errors import BpmonError

RunsDir = Annotated[
    Path,
    typer.Option("--runs-dir", envvar="BPMON_RUNS_DIR", help="Where run reports are kept."),
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
