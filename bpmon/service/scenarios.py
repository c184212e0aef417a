"""The scenarios a surface offers: found by name or path, the shipped examples, a job's plan.

Surfaces stand on the service and the model only (import-linter checks it): they never parse a
scenario themselves. They name one (a file, or a shipped example such as ``demo``), get a
:class:`Scenario` back to hand to :func:`bpmon.service.facade.run_scenario` or a watch, list the
examples with the diagnosis each is written to show, and show a job's plan as text or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bpmon.model.errors import ConfigError
from bpmon.scenario import (
    Scenario,
    example_names,
    example_path,
    load_example,
    load_expectation,
    load_scenario,
)
from bpmon.scenario.compiled import JobPlan, compile_job
from bpmon.scenario.plan_text import plan_lines, plan_to_dict

__all__ = [
    "JobPlan",
    "Scenario",
    "ShippedExample",
    "job_plan",
    "plan_lines",
    "plan_to_dict",
    "resolve_scenario",
    "shipped_example",
    "shipped_examples",
]


@dataclass(frozen=True, slots=True)
class ShippedExample:
    """A shipped example: its name, its job's name, and the diagnosis it is written to show."""

    name: str
    job: str
    shows: str


def resolve_scenario(name_or_path: str, *, allow_unsupported: bool = False) -> Scenario:
    """A scenario file by path, or one of the shipped examples by name (``demo``, ``hot-key``).

    ``allow_unsupported`` also loads what the runtime cannot run yet (for tools that only read).
    """
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except OSError as exc:
        raise ConfigError(f"scenario {name_or_path[:80]!r}: {exc.strerror}") from None
    if exists:
        return load_scenario(path, allow_unsupported=allow_unsupported)
    if name_or_path.removesuffix(".toml") in example_names() and "/" not in name_or_path:
        return load_example(name_or_path)
    if path.suffix == ".toml" or "/" in name_or_path:
        return load_scenario(path)  # says which file is missing
    raise ConfigError(
        f"{name_or_path!r} is neither a scenario file nor a shipped example; "
        f"examples: {', '.join(example_names())}"
    )


def shipped_examples() -> list[str]:
    """The names of the example scenarios bpmon ships."""
    return list(example_names())


def shipped_example(name: str) -> ShippedExample:
    """A shipped example with its job's name and, from its ``[expect]`` table, what it shows."""
    expect = load_expectation(example_path(name))
    shows = "the scenario as written"
    if expect is not None and not expect.root_cause:
        shows = "no backpressure: a healthy job"
    elif expect is not None:
        subtasks = ", ".join(map(str, expect.subtasks))
        plural = "s" if len(expect.subtasks) > 1 else ""
        where = f", subtask{plural} {subtasks}" if subtasks else ""
        shows = f"{expect.kind} at {expect.root_cause}{where}"
    return ShippedExample(name, load_example(name).name, shows)


def job_plan(name_or_path: str) -> JobPlan:
    """The compiled plan of a scenario (``bpmon plan``): regions, slot sharing groups, slots and
    managed memory, as the runtime will schedule them; nothing is run."""
    return compile_job(resolve_scenario(name_or_path, allow_unsupported=True))
