"""The in-process runtime: a faithful Python model of Flink's network stack and task execution.

May import: ``bpmon.model.values``, ``bpmon.model.errors``, ``bpmon.scenario`` and the standard
library. Nothing here starts a thread at import time or reads the environment.
"""
