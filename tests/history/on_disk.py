"""What a history holds on disk, listed the way the history tests compare it."""

from __future__ import annotations

import os
from pathlib import Path


def files(folder: Path) -> list[Path]:
    """Every file under ``folder`` (hidden and temporary ones included), sorted."""
    return sorted(Path(d) / n for d, _, names in os.walk(folder) for n in names)
