"""The ``bpmon`` command line: a surface over :mod:`bpmon.service`.

Every expected error is a :class:`bpmon.errors.BpmonError`, printed as one line on stderr with its
exit code; a traceback is a bug.
"""

from __future__ import annotations

import typer

import bpmon

app = typer.Typer(
    name="bpmon",
    help="Find where a streaming pipeline is backpressured, and why.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Find where a streaming pipeline is backpressured, and why."""


@app.command()
def version() -> None:
    """Print bpmon's version."""
    typer.echo(bpmon.__version__)


def main() -> None:
    """Entry point of the ``bpmon`` script."""
    app()
