"""The in-process runtime: a faithful Python model of Flink's network stack and task execution.

Nothing here starts a thread at import time or reads the environment.
"""
