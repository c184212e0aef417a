"""The one-line error a bad scenario file gets, read the way a user meets it: from a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpmon.model.errors import ScenarioError
from bpmon.scenario import load_scenario


def error_of(tmp_path: Path, text: str, name: str = "slow.toml") -> str:
    """Load ``text`` from a file called ``name`` and return the one-line error it must raise,
    which starts with the file's path."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path) + ": ")
    return message
