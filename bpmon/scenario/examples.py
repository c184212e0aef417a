"""The example scenarios that ship inside the package (``bpmon/scenarios/*.toml``).

They are package data, found through :mod:`importlib.resources`, so ``bpmon run demo`` works from
a checkout and from an installed wheel alike.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from bpmon.model.datafiles import real_file
from bpmon.model.errors import ScenarioError
from bpmon.scenario._table import did_you_mean
from bpmon.scenario.loader import load_scenario
from bpmon.scenario.spec import Scenario


def _folder() -> Traversable:
    return resources.files("bpmon").joinpath("scenarios")


def example_names() -> list[str]:
    """The names of the shipped examples (file stems), sorted: ``["demo", "fan-in", ...]``."""
    folder = _folder()
    if not folder.is_dir():
        return []
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml") and entry.is_file()
    )


def example_path(name: str) -> Path:
    """The file of the shipped example ``name`` (``"demo"`` or ``"demo.toml"``).

    Raises:
        ScenarioError: there is no such example; the message lists the known ones.
    """
    stem = name.removesuffix(".toml")
    names = example_names()
    if stem not in names:
        raise ScenarioError(
            f'no example scenario named "{name}"{did_you_mean(stem, names)}; '
            f"known: {', '.join(names) or 'none'}"
        )
    return real_file(_folder().joinpath(f"{stem}.toml"))


def load_example(name: str) -> Scenario:
    """Load and check the shipped example ``name``."""
    return load_scenario(example_path(name))
