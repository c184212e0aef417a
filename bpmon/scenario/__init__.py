"""Scenario and topology files (``docs/scenario.md``, ``docs/topology.md``) as checked values.

A scenario describes one streaming job for the in-process runtime; a topology file describes the
stages of a process bpmon only watches. Both load into the same frozen :class:`Scenario`.
Part of the model layer: imports the standard library, ``bpmon.model.errors`` and
``bpmon.model.values`` only.

Modules: ``network`` (the ``[network]`` table), ``spec`` (the values), ``loader`` (files and
settings tables), ``operators`` and ``wiring`` (operators and the graph checks), ``graph`` (graph
algorithms over names), ``topology``, ``expectation`` (``[expect]``), ``examples`` (shipped files).
"""

from bpmon.model.checkpoints import CheckpointMode
from bpmon.model.values import FlowControl
from bpmon.scenario.examples import example_names, example_path, load_example
from bpmon.scenario.expectation import Expectation, load_expectation
from bpmon.scenario.loader import (
    SUPPORTED_EXCHANGES,
    check_runtime_support,
    load_scenario,
    parse_scenario,
)
from bpmon.scenario.network import MIN_SEGMENT_SIZE, NetworkConfig
from bpmon.scenario.spec import (
    CHECKPOINT_MODES,
    EXCHANGES,
    KINDS,
    PARTITIONERS,
    CheckpointConfig,
    Exchange,
    FailSpec,
    InputSpec,
    MonitorConfig,
    OperatorKind,
    OperatorSpec,
    Partitioner,
    Scenario,
)
from bpmon.scenario.topology import (
    default_thread_pattern,
    load_topology,
    parse_topology,
    thread_name,
    thread_pattern,
)

__all__ = [
    "CHECKPOINT_MODES",
    "EXCHANGES",
    "KINDS",
    "MIN_SEGMENT_SIZE",
    "PARTITIONERS",
    "SUPPORTED_EXCHANGES",
    "CheckpointConfig",
    "CheckpointMode",
    "Exchange",
    "Expectation",
    "FailSpec",
    "FlowControl",
    "InputSpec",
    "MonitorConfig",
    "NetworkConfig",
    "OperatorKind",
    "OperatorSpec",
    "Partitioner",
    "Scenario",
    "check_runtime_support",
    "default_thread_pattern",
    "example_names",
    "example_path",
    "load_example",
    "load_expectation",
    "load_scenario",
    "load_topology",
    "parse_scenario",
    "parse_topology",
    "thread_name",
    "thread_pattern",
]
