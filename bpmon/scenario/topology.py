"""Topology files (``docs/topology.md``) and how threads map to subtasks.

For a process bpmon did not start, a topology file says which stage feeds which: a scenario file
of which only ``name`` and the operators' ``name`` and ``inputs`` are required, plus an optional
``threads`` regex per operator. Threads matching it become the operator's subtasks; without it
the runtime's naming applies, which is Flink's: ``"{vertex} ({index+1}/{parallelism})"``.
"""

from __future__ import annotations

import os
import re

from bpmon.scenario.loader import build_scenario, parse_toml, read_toml_file
from bpmon.scenario.spec import OperatorSpec, Scenario


def thread_name(vertex: str, index: int, parallelism: int) -> str:
    """The name of subtask ``index`` (0-based) of ``vertex``, as Flink and bpmon's runtime give it.

    Raises:
        ValueError: ``index`` is not in ``range(parallelism)``.
    """
    if not 0 <= index < parallelism:
        raise ValueError(f"subtask index {index} out of range for parallelism {parallelism}")
    return f"{vertex} ({index + 1}/{parallelism})"


def default_thread_pattern(vertex: str) -> str:
    """A regex matching exactly the names :func:`thread_name` gives ``vertex``'s subtasks."""
    return rf"^{re.escape(vertex)} \((\d+)/(\d+)\)$"


def thread_pattern(operator: OperatorSpec) -> str:
    """The regex selecting ``operator``'s threads: its ``threads`` key, else the default."""
    return (
        operator.threads if operator.threads is not None else default_thread_pattern(operator.name)
    )


def load_topology(path: str | os.PathLike[str]) -> Scenario:
    """Load the topology file at ``path``; every scenario-file rule holds, kinds are defaulted.

    ``kind`` defaults to ``source`` without inputs, ``sink`` when nothing reads from the
    operator, else ``map``; ``rate`` and ``fanout`` are optional. Exchanges are not checked
    against the runtime: nothing is run.

    Raises:
        ScenarioError: the file is missing, not TOML, or breaks a rule (a ``threads`` regex that
            does not compile included).
    """
    where = str(path)
    return build_scenario(read_toml_file(path), where, topology=True, path=where)


def parse_topology(text: str, source: str = "<string>") -> Scenario:
    """Parse a topology held in a string; ``source`` names it in errors."""
    return build_scenario(parse_toml(text, source), source, topology=True)
