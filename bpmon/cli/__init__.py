"""The ``bpmon`` command line: :mod:`~bpmon.cli.entry` (the script's entry point, ``main``: it
imports the rest once a Ctrl-C can be answered), :mod:`~bpmon.cli.commands` (the commands),
:mod:`~bpmon.cli.history` (``bpmon history`` and ``bpmon analyze``), :mod:`~bpmon.cli.options`
(the options and the one-line errors both share) and :mod:`~bpmon.cli.help` (the help text's
layout).
"""
