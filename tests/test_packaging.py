"""Installed from a wheel, bpmon still finds its rules, profiles, example scenarios, Prometheus
alert rules (with their promtool unit tests) and Grafana dashboard.

The wheel is built from this checkout and installed twice, without the checkout on the path: into a
fresh venv, and as a ``pip install --user`` (a site folder outside ``sys.prefix``, where a lookup
under ``<prefix>/share`` or beside the sources would miss). Both must read the shipped files from
inside the installed package, and ``BPMON_DATA_DIR`` must override a shipped profile.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OFFLINE = ("--no-deps", "--no-build-isolation", "--no-index", "--disable-pip-version-check")
"""pip downloads nothing: no dependencies, no build environment, no index, no version check."""
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "node_modules")
"""What a copy of the checkout leaves out: it is built, not developed in."""
CHECK = """
import json
import bpmon
from bpmon.model.datafiles import data_file, shipped_dir
from bpmon.collectors.profile import load_profile
from bpmon.rules.config import load_rules
from bpmon.scenario import example_path, load_example
print(bpmon.__file__)
print(data_file("rules", "backpressure"))
print(data_file("collectors", "bpmon-runtime"))
print(example_path("demo"))
print(load_profile("bpmon-runtime").name, load_rules().levels.ok_max, load_example("demo").name)
dashboard = data_file("dashboards", "bpmon-overview", suffix=".json")
print(dashboard)
print(data_file("rules", "prometheus-alerts", suffix=".yml"))
unit_tests = shipped_dir("rules").joinpath("tests", "prometheus-alerts.test.yml")
print(json.loads(dashboard.read_text())["uid"], "rule_files:" in unit_tests.read_text())
from bpmon.model.datafiles import shipped_doc
print(shipped_doc("scenario").splitlines()[0], shipped_doc("report").splitlines()[0])
"""


def _run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env=env, cwd=cwd, check=False
    )
    assert done.returncode == 0, f"{argv[:4]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from this checkout (the data folders reach it through bpmon/data/*).

    Built offline: no build isolation, so pip downloads nothing and builds with the setuptools
    of this environment (the ``test`` extra requires the one ``[build-system]`` names).
    """
    out = tmp_path_factory.mktemp("wheels")
    # pip builds in the source tree: from a copy, so no build/ or *.egg-info left in the checkout
    # by an earlier, interrupted build can leak into this wheel (it once lacked the package)
    source = tmp_path_factory.mktemp("source") / "bpmon"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    _run([sys.executable, "-m", "pip", "wheel", str(source), *OFFLINE, "-q", "-w", str(out)])
    (built,) = out.glob("bpmon-*.whl")
    return built


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would put the checkout or an override in reach."""
    unwanted = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "BPMON_DATA_DIR")
    env = {k: v for k, v in os.environ.items() if k not in unwanted}
    env.update(extra)
    return env


def _check(python: Path, root: Path, cwd: Path, env: dict[str, str]) -> list[str]:
    """Run CHECK with ``python``; every file it found must lie under ``root``, none in the repo."""
    out = _run([str(python), "-c", CHECK], env=env, cwd=cwd).splitlines()
    for found in out[:4] + out[5:7]:
        assert Path(found).is_relative_to(root), f"{found} is not inside the install {root}"
        assert not Path(found).resolve().is_relative_to(REPO), f"{found} is the checkout's"
    return out


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_carries_the_data_files(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", *OFFLINE, str(wheel)])
    out = _check(python, env_dir, tmp_path, _clean_env())
    assert out[1].endswith("/bpmon/data/rules/backpressure.toml")
    assert out[4] == "bpmon-runtime 0.1 demo"
    assert out[5].endswith("/bpmon/data/dashboards/bpmon-overview.json")
    assert out[6].endswith("/bpmon/data/rules/prometheus-alerts.yml")
    assert out[7] == "bpmon-overview True"
    assert out[8] == "# Scenario files # The report (`--json`)"


@pytest.mark.slow
def test_a_user_install_finds_the_data_and_honours_bpmon_data_dir(
    wheel: Path, tmp_path: Path
) -> None:
    # pip allows --user only where user site-packages are visible: a venv that sees the system's.
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True, system_site_packages=True)
    python = env_dir / "bin" / "python"
    user_base = tmp_path / "user"
    env = _clean_env(PYTHONUSERBASE=str(user_base))
    _run(
        [str(python), "-m", "pip", "install", "-q", "--user", *OFFLINE,
         "--no-warn-script-location", str(wheel)],
        env=env,
    )  # fmt: skip
    out = _check(python, user_base, tmp_path, env)
    assert out[4] == "bpmon-runtime 0.1 demo"

    # The same install, with a user's copy of a shipped profile in BPMON_DATA_DIR.
    shipped = Path(out[2]).read_text(encoding="utf-8")
    mine = tmp_path / "my-data" / "collectors" / "bpmon-runtime.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text(shipped.replace('name = "bpmon-runtime"', 'name = "mine"', 1), "utf-8")
    env["BPMON_DATA_DIR"] = str(tmp_path / "my-data")
    overridden = _run([str(python), "-c", CHECK], env=env, cwd=tmp_path).splitlines()
    assert overridden[2] == str(mine)
    assert overridden[4] == "mine 0.1 demo"
