"""``python -m bpmon``: the same as the ``bpmon`` command."""

from bpmon.cli.commands import main

main()
