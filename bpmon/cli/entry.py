"""The ``bpmon`` script's entry point (and ``python -m bpmon``'s): :func:`main`.

It imports the command line (:mod:`bpmon.cli.commands`, typer) only inside :func:`main`, where a
Ctrl-C is answered: one pressed while bpmon is still starting exits 130 with one line on stderr,
as one pressed later does, not with a ``KeyboardInterrupt`` traceback.

It imports the standard library only (:mod:`bpmon.cli.commands` inside :func:`main`).
"""

from __future__ import annotations

import signal
import sys

from bpmon.cli import INTERRUPTED


def main() -> None:
    """Run the ``bpmon`` command line; a Ctrl-C before a command handles it exits 130."""
    try:
        from bpmon.cli.commands import main as run_command_line

        run_command_line()  # exits: a command's code, 2 for a usage error, 130 for a Ctrl-C
    except KeyboardInterrupt:
        # while importing, or while typer builds the commands: no command has started yet
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: no traceback either
        print(INTERRUPTED, file=sys.stderr, flush=True)
        sys.exit(130)
