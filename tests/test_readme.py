"""The README's promises: its set-up commands exist and every command it documents is real."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
COMMANDS = re.findall(r"^### `bpmon ([a-z]+)", README, flags=re.MULTILINE)


def test_readme_opens_with_the_two_set_up_commands() -> None:
    block = README.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert block[0].startswith("./scripts/setup && .venv/bin/bpmon demo")
    assert block[1].startswith("./scripts/setup --test && .venv/bin/python -m pytest")
    assert (REPO / "scripts" / "setup").stat().st_mode & 0o111
    assert "scripts/setup --test" in (REPO / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest" in (REPO / ".ci" / "run").read_text()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_documented_command_exists(command: str, bpmon_bin: Path) -> None:
    done = subprocess.run(
        [str(bpmon_bin), command, "--help"], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_the_documented_commands_are_all_there() -> None:
    assert {"demo", "run", "diagnose", "monitor"} <= set(COMMANDS)


def test_every_shipped_example_named_in_the_readme_exists(bpmon_bin: Path) -> None:
    listed = subprocess.run(
        [str(bpmon_bin), "examples"], check=True, capture_output=True, text=True
    )
    names = set(listed.stdout.split())
    ran = re.findall(r"^\$ bpmon run ([a-z-]+)$", README, flags=re.MULTILINE)
    assert ran, "the README shows no session"
    for name in ran:
        assert name in names, f"the README runs {name!r}, which bpmon does not ship"


HEADERS = re.findall(r"^### `bpmon ([a-z]+)([^`]*)`", README, flags=re.MULTILINE)


@pytest.mark.parametrize(("command", "usage"), HEADERS, ids=[h[0] for h in HEADERS])
def test_every_flag_a_heading_documents_is_in_the_commands_help(
    command: str, usage: str, bpmon_bin: Path
) -> None:
    done = subprocess.run(
        [str(bpmon_bin), command, "--help"],
        check=True,
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    for flag in re.findall(r"--[a-z][a-z-]*", usage):
        assert flag in done.stdout, f"{command} --help does not list {flag}"


def test_the_exit_code_table_is_the_error_trees() -> None:
    from bpmon.model import errors

    section = README.split("### Errors and exit codes", 1)[1].split("\n## ", 1)[0]
    table = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", section, flags=re.MULTILINE))
    leaves = {
        errors.ConfigError: "bad input",
        errors.InsufficientBuffersError: "network buffers",
        errors.JobError: "the job failed",
        errors.CollectorError: "cannot be read",
        errors.HistoryError: "unreadable",
    }
    for error, words in leaves.items():
        assert words in table[str(error.exit_code)], (error.__name__, table)
