"""bpmon: find where a streaming pipeline is backpressured, and why.

Layers (imports point down only, checked by import-linter in ``pyproject.toml``)::

    surfaces    bpmon.cli, bpmon.web, bpmon.prometheus
    service     bpmon.service
    history     bpmon.history      diagnosis  bpmon.rules      collection  bpmon.collectors
    runtime     bpmon.runtime
    model       bpmon.model, bpmon.errors, bpmon.scenario (stdlib only)

Importing ``bpmon`` (or ``bpmon.runtime``) imports none of the heavy dependencies.
"""

__version__ = "0.1.0"
