"""``python -m bpmon``: the same as the ``bpmon`` command."""

from bpmon.cli.entry import main

main()
