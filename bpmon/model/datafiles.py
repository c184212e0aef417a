"""One lookup for bpmon's data files: a user's override folder first, then the shipped defaults.

The data users edit lives at the top of the repository, beside the code (monitoring-mixin style):
``rules/`` (diagnosis thresholds, and Prometheus's alerting rules as ``prometheus-alerts.yml``),
``collectors/`` (collector profiles) and ``dashboards/`` (Grafana dashboards, ``NAME.json``). They
ship *inside* the package as ``bpmon/data/KIND/``: in git those entries are symlinks to the
top-level folders, and building a wheel or an sdist copies the files through them. The shipped
defaults are therefore package resources, read through :mod:`importlib.resources`, and found the
same way from a clone (editable install), a wheel, a ``pip install --user`` and the Docker image.

A user overrides any shipped file without touching the install: ``KIND/NAME.toml`` in the override
folder wins over the shipped one. The override folder is the one given to :func:`set_data_dir` (the
CLI's ``--data-dir``), else ``$BPMON_DATA_DIR``, else there is none. A name given as a path to an
existing ``.toml`` file is used as is.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Literal

from bpmon.model.errors import ConfigError

DataKind = Literal["rules", "collectors", "dashboards"]
"""The kinds of data file bpmon ships, each a folder of ``NAME.toml`` files (``NAME.json`` for
dashboards; look them up with ``suffix=".json"``)."""

DATA_DIR_ENV = "BPMON_DATA_DIR"
"""The environment variable naming the override folder (below an explicit :func:`set_data_dir`)."""

_explicit: Path | None = None
_extracted: contextlib.ExitStack | None = None


def set_data_dir(path: str | Path | None) -> None:
    """Use ``path`` as the override folder for every later lookup (the CLI's ``--data-dir``).

    It takes precedence over ``$BPMON_DATA_DIR``; ``None`` goes back to the environment variable.

    Raises:
        ConfigError: ``path`` is not an existing folder.
    """
    global _explicit
    if path is None:
        _explicit = None
        return
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(
            f"--data-dir {folder}: not a folder; create it (with rules/ or collectors/ inside, "
            "holding NAME.toml files) or drop the option"
        )
    _explicit = folder


def override_dir() -> Path | None:
    """The user's override folder: :func:`set_data_dir`'s, else ``$BPMON_DATA_DIR``'s, else None.

    Raises:
        ConfigError: ``$BPMON_DATA_DIR`` is set but is not an existing folder.
    """
    if _explicit is not None:
        return _explicit
    value = os.environ.get(DATA_DIR_ENV, "")
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise ConfigError(
            f"{DATA_DIR_ENV}={value}: not a folder; create it (with rules/ or collectors/ inside, "
            f"holding NAME.toml files) or unset {DATA_DIR_ENV}"
        )
    return folder


def shipped_dir(kind: DataKind) -> Traversable:
    """The package resource folder holding bpmon's shipped ``kind`` files (``bpmon/data/KIND``)."""
    return resources.files("bpmon").joinpath("data", kind)


def data_names(kind: DataKind, suffix: str = ".toml") -> list[str]:
    """Every name :func:`data_file` resolves for ``kind``: the override folder's and the shipped."""
    names: set[str] = set()
    override = override_dir()
    if override is not None and (override / kind).is_dir():
        names.update(p.stem for p in (override / kind).glob(f"*{suffix}") if p.is_file())
    shipped = shipped_dir(kind)
    if shipped.is_dir():
        names.update(
            entry.name.removesuffix(suffix)
            for entry in shipped.iterdir()
            if entry.name.endswith(suffix) and entry.is_file()
        )
    return sorted(names)


def data_file(kind: DataKind, name: str, suffix: str = ".toml") -> Path:
    """The file for ``name`` (``python-queue`` -> ``collectors/python-queue.toml``).

    Looked up in the override folder's ``KIND/`` first, then among the shipped files. A ``name``
    that is an existing ``suffix`` file is used as is, so users can pass their own files; any
    other name with a folder part is an error, and a bare ``NAME.toml`` is looked up as ``NAME``.

    Raises:
        ConfigError: no such file; the one-line message says where it looked and what to do.
    """
    as_path = Path(name)
    if as_path.suffix == suffix and as_path.is_file():
        return as_path
    if len(as_path.parts) != 1:
        raise ConfigError(
            f"no {kind} file named {name}: that path does not exist; check it, or give a name "
            f"({', '.join(data_names(kind, suffix)) or 'none'})"
        )
    name = name.removesuffix(suffix)
    override = override_dir()
    if override is not None and (override / kind / f"{name}{suffix}").is_file():
        return override / kind / f"{name}{suffix}"
    shipped = shipped_dir(kind)
    resource = shipped.joinpath(f"{name}{suffix}")
    if resource.is_file():
        return real_file(resource)
    if not shipped.is_dir():
        raise ConfigError(
            f"bpmon's shipped {kind} files are missing (looked in {shipped}); reinstall bpmon, or "
            f"in a clone check that bpmon/data/{kind} is a symlink to ../../{kind}"
        )
    looked = f"{override / kind} and in " if override is not None else ""
    place = override if override is not None else f"${DATA_DIR_ENV}"
    raise ConfigError(
        f"no {kind} file named {name!r} (looked in {looked}{shipped}); known: "
        f"{', '.join(data_names(kind, suffix)) or 'none'}; put {name}{suffix} in "
        f"{place}/{kind}/ or pass a path to a {suffix} file"
    )


def real_file(resource: Traversable) -> Path:
    """A package resource as a real file: itself when the package is installed as files, else a
    copy extracted from the zip it is in, removed when the interpreter exits."""
    global _extracted
    if isinstance(resource, Path):
        return resource
    if _extracted is None:
        _extracted = contextlib.ExitStack()
        atexit.register(_extracted.close)
    return _extracted.enter_context(resources.as_file(resource))


def shipped_doc(name: str) -> str:
    """The text of one of bpmon's format documents (``docs/NAME.md``), as installed.

    Raises:
        ConfigError: there is no such document; the message lists the ones there are.
    """
    folder = resources.files("bpmon") / "data" / "docs"
    known = sorted(
        p.name.removesuffix(".md")
        for p in folder.iterdir()
        if p.name.endswith(".md") and p.name != "README.md"
    )
    if name.removesuffix(".md") not in known:
        raise ConfigError(f"no document {name!r}; bpmon has: {', '.join(known)}")
    return (folder / f"{name.removesuffix('.md')}.md").read_text(encoding="utf-8")
