"""bpmon: find where a streaming pipeline is backpressured, and why.

Packages by layer (imports point down only; ``lint-imports`` checks it, ``docs/ARCHITECTURE.md``
explains it)::

    surfaces     bpmon.cli, bpmon.web, bpmon.prometheus
    renderers    bpmon.render
    service      bpmon.service
    history      bpmon.history      diagnosis  bpmon.rules      collection  bpmon.collectors
    runtime      bpmon.runtime
    scenario     bpmon.scenario
    model        bpmon.model (standard library only)

Importing ``bpmon`` (or ``bpmon.runtime``) imports none of the heavy dependencies.
"""

__version__ = "0.1.0"
