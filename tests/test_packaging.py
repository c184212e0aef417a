"""Installed from a wheel, bpmon still finds its rules, profiles and example scenarios."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECK = """
from bpmon.datafiles import data_dir
from bpmon.collectors.profile import load_profile
from bpmon.rules.config import load_rules
from bpmon.scenario import load_example
print(data_dir("rules").parent)
print(load_profile("bpmon-runtime").name, load_rules().levels.ok_max, load_example("demo").name)
"""


@pytest.mark.slow
def test_a_wheel_installs_the_data_folders(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(wheels)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    (wheel,) = wheels.glob("bpmon-*.whl")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    out = subprocess.run(
        [str(python), "-c", CHECK], check=True, capture_output=True, text=True, cwd=tmp_path
    ).stdout.splitlines()
    assert out[0] == str(env / "share" / "bpmon")  # not the checkout's folders
    assert out[1] == "bpmon-runtime 0.1 demo"
