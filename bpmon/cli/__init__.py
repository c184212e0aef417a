"""The ``bpmon`` command line: :mod:`~bpmon.cli.commands` (its entry point, ``main``),
:mod:`~bpmon.cli.history` (``bpmon history`` and ``bpmon analyze``), :mod:`~bpmon.cli.options`
(the options and the one-line errors both share) and :mod:`~bpmon.cli.help` (the help text's
layout).
"""
