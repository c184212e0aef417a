"""Where the user-editable data folders are: ``rules/``, ``collectors/``, ``dashboards/``.

They live at the top of a checkout (monitoring-mixin style: data users edit, beside the code), and a
wheel installs them under ``<prefix>/share/bpmon/``. This module finds them in both cases, so a
profile or rule file is looked up the same way whether bpmon runs from a clone or from a wheel.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from bpmon.errors import ConfigError

DataKind = Literal["rules", "collectors", "dashboards"]

_CHECKOUT_ROOT = Path(__file__).resolve().parents[1]


def data_dir(kind: DataKind) -> Path:
    """The folder holding bpmon's shipped ``kind`` files (checkout first, then the install)."""
    candidates = [
        _CHECKOUT_ROOT / kind,
        Path(sys.prefix) / "share" / "bpmon" / kind,
        Path(sys.base_prefix) / "share" / "bpmon" / kind,
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise ConfigError(
        f"bpmon's {kind}/ folder was not found (looked in {candidates[0]} and "
        f"{candidates[1]}); reinstall bpmon or pass the file explicitly"
    )


def data_file(kind: DataKind, name: str, suffix: str = ".toml") -> Path:
    """A shipped data file by name (``python-queue`` -> ``collectors/python-queue.toml``).

    A ``name`` that is an existing path is returned as is, so users can pass their own files.
    """
    as_path = Path(name)
    if as_path.suffix == suffix and as_path.is_file():
        return as_path
    folder = data_dir(kind)
    path = folder / f"{name}{suffix}"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob(f"*{suffix}"))
        raise ConfigError(
            f"no {kind} file named {name!r} in {folder}; known: {', '.join(known) or 'none'} "
            f"(or pass a path to a {suffix} file)"
        )
    return path
