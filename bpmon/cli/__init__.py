"""The ``bpmon`` command line: :mod:`~bpmon.cli.entry` (the script's entry point, ``main``: it
imports the rest once a Ctrl-C can be answered), :mod:`~bpmon.cli.commands` (the commands),
:mod:`~bpmon.cli.history` (``bpmon history`` and ``bpmon analyze``), :mod:`~bpmon.cli.options`
(the options and the one-line errors both share) and :mod:`~bpmon.cli.help` (the help text's
layout).
"""

INTERRUPTED = "bpmon: interrupted"
"""The line a Ctrl-C prints when no command has started yet (the exit code is 130): here, so that
the entry point and the commands share it without importing each other."""
