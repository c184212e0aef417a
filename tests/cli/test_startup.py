"""``bpmon`` starts at once, and a Ctrl-C at any moment, startup included, exits 130 (issue 31).

What ``bpmon --version`` and ``bpmon [COMMAND] -h`` import is checked, not how long they take: a
clock fails on a loaded machine, the list of imported modules does not. A Ctrl-C while bpmon is
importing is pressed by the process itself, from an import hook, as a given module is about to be
imported: no race with a timer either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from bpmon.cli import options
from bpmon.cli.commands import app

LIGHT = {
    "bpmon",
    "bpmon.cli",
    "bpmon.cli.entry",
    "bpmon.cli.commands",
    "bpmon.cli.history",
    "bpmon.cli.options",
    "bpmon.cli.help",
    "bpmon.model",
    "bpmon.model.errors",
    "bpmon.model.datafiles",  # the root callback's --data-dir, before every command
}
"""Every bpmon module ``--version`` or ``-h`` may import: the command line and what its options
need. Not the service, the collectors, the rules, the runtime, the renderers or the history."""
HEAVY = ("pyspark", "pyarrow", "fastapi", "uvicorn", "plotly", "jinja2", "prometheus_client")

PROBE = """
import json, sys
from bpmon.cli.entry import main
out, runs = sys.argv[1], json.loads(sys.argv[2])
seen, found = set(sys.modules), []
for args in runs:
    sys.argv = ["bpmon", *args]
    try:
        main()
        code = None
    except SystemExit as exit:
        code = exit.code
    found.append({"args": args, "code": code, "new": sorted(set(sys.modules) - seen)})
    seen = set(sys.modules)
with open(out, "w") as f:
    json.dump(found, f)
"""
"""Runs each argument list through the console script's ``main`` in one process and writes, for
each, its exit code and the modules it imported first."""


def _probe(runs: list[list[str]], tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "imported.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), json.dumps(runs)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(out.read_text())
    return found


def _too_heavy(modules: list[str]) -> list[str]:
    ours = [m for m in modules if m.split(".")[0] == "bpmon" and m not in LIGHT]
    return ours + [m for m in modules if m.split(".")[0] in HEAVY]


def _helps() -> list[list[str]]:
    """``-h`` of bpmon and of every command and subcommand, as typer builds them."""
    root = typer.main.get_command(app)
    helps = [["-h"], ["--help"]]
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        helps.append([name, "-h"])
        helps += [[name, sub, "-h"] for sub in getattr(command, "commands", {})]
    return helps


def test_version_imports_neither_the_service_nor_rich(tmp_path: Path) -> None:
    (found,) = _probe([["--version"]], tmp_path)
    assert found["code"] == 0
    assert not _too_heavy(found["new"]), _too_heavy(found["new"])
    assert "rich" not in found["new"]  # typer needs it for --help, not for --version
    for layer in ("service", "collectors", "rules", "runtime", "render", "history", "scenario"):
        assert f"bpmon.{layer}" not in found["new"]


def test_every_help_imports_no_layer_below_the_command_line(tmp_path: Path) -> None:
    helps = _helps()
    assert ["run", "-h"] in helps and ["history", "import", "-h"] in helps, helps
    found = _probe([*helps, ["version"]], tmp_path)
    for each in found:
        assert each["code"] == 0, each["args"]
        assert not _too_heavy(each["new"]), (each["args"], _too_heavy(each["new"]))


def test_the_defaults_the_options_show_are_the_service_s() -> None:
    # repeated in bpmon/cli/options.py so that --help needs no service: they must not drift
    from bpmon.service.facade import DEFAULT_RUNS_DIR
    from bpmon.service.history import DEFAULT_MASTER
    from bpmon.service.watching import STUCK_AFTER_S

    assert options.DEFAULT_RUNS_DIR == DEFAULT_RUNS_DIR
    assert options.DEFAULT_MASTER == DEFAULT_MASTER
    assert options.STUCK_AFTER_S == STUCK_AFTER_S


def test_the_console_script_and_python_dash_m_start_through_the_entry_module() -> None:
    (script,) = [e for e in _entry_points() if e.name == "bpmon"]
    assert script.value == "bpmon.cli.entry:main"
    main = (Path(__file__).parents[2] / "bpmon" / "__main__.py").read_text()
    assert "from bpmon.cli.entry import main" in main


def _entry_points() -> Any:
    import importlib.metadata

    return importlib.metadata.entry_points(group="console_scripts")


# -- Ctrl-C while bpmon starts -------------------------------------------------------------------

CTRL_C_AT = """
import os, runpy, signal, sys

class CtrlCAt:
    '''A finder that finds nothing: it presses Ctrl-C as the module it names is imported.'''

    def __init__(self, name):
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name:
            sys.meta_path.remove(self)
            print("pressed", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGINT)
        return None

module, how, script, *args = sys.argv[1:]
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
sys.meta_path.insert(0, CtrlCAt(module))
sys.argv = [script, *args]
if how == "script":
    runpy.run_path(script, run_name="__main__")  # the installed bpmon, as the shell runs it
else:
    runpy.run_module("bpmon", run_name="__main__", alter_sys=True)  # python -m bpmon
"""
"""Runs ``bpmon ARGS`` (the installed script, or ``python -m bpmon``) with Ctrl-C pressed as
``module`` is first imported."""


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("bpmon.cli.commands", ["--version"]),  # the first thing the entry module imports
        ("typer", ["--version"]),
        ("bpmon.cli.history", ["-h"]),
        ("typer.rich_utils", ["-h"]),  # typer's help, once the arguments are being parsed
        ("typer.rich_utils", ["run", "-h"]),  # a command's help, shown after the root callback
    ],
)
@pytest.mark.parametrize("how", ["script", "-m"])
def test_ctrl_c_while_bpmon_starts_exits_130_with_one_line(
    bpmon_bin: Path, module: str, args: list[str], how: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_AT, module, how, str(bpmon_bin), *args],
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stderr.startswith("pressed\n"), done.stderr  # the Ctrl-C was pressed, and then
    assert done.returncode == 130, done.stderr
    assert done.stderr == "pressed\nbpmon: interrupted\n", done.stderr  # no traceback
    assert done.stdout == ""  # it did not go on to print the version or the help
