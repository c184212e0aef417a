"""The format documents in ``docs/`` against the code, so they cannot drift apart.

Every TOML example in the docs loads with bpmon's own loader, the documented error is the error
the loader gives, the JSON report example reads back and writes out unchanged, the key tables list
exactly the keys the loader accepts, and every documented scenario key is shown (with a comment)
in at least one shipped example. Links between the documents and from the README resolve.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import fields
from pathlib import Path
from typing import get_args

import pytest

from bpmon.collectors.profile import _KEYS as PROFILE_KEYS
from bpmon.collectors.profile import parse_profile
from bpmon.model.autoscaler import VERDICT_KINDS
from bpmon.model.errors import ScenarioError
from bpmon.model.report_json import report_from_json, report_to_dict
from bpmon.model.values import CauseKind, FindingKind
from bpmon.scenario import NetworkConfig, example_names, example_path, parse_scenario
from bpmon.scenario import parse_topology as parse_topology_text
from bpmon.scenario.expectation import EXPECT_KEYS
from bpmon.scenario.loader import CHECKPOINT_KEYS, CLUSTER_KEYS, MONITOR_KEYS, TOP_KEYS
from bpmon.scenario.operators import FAIL_KEYS, INPUT_KEYS, OPERATOR_KEYS, TOPOLOGY_OPERATOR_KEYS

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SCENARIO_DOC = DOCS / "scenario.md"
TOPOLOGY_DOC = DOCS / "topology.md"
REPORT_DOC = DOCS / "report.md"

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} .*$", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")

SCENARIO_SECTIONS = {
    "## Top-level keys": "",
    "## `[cluster]`": "cluster",
    "## `[network]`": "network",
    "## `[checkpoints]`": "checkpoints",
    "## `[monitor]`": "monitor",
    "## `[[operators]]`": "operators",
    "### `inputs`": "operators.inputs",
    "## Injecting a failure": "operators.fail",
    "## `[expect]`": "expect",
}
"""The sections of docs/scenario.md holding a key table, and the TOML table each describes."""

ACCEPTED = {
    "": TOP_KEYS,
    "cluster": CLUSTER_KEYS,
    "network": tuple(f.name for f in fields(NetworkConfig)),
    "checkpoints": CHECKPOINT_KEYS,
    "monitor": MONITOR_KEYS,
    "operators": OPERATOR_KEYS,
    "operators.inputs": INPUT_KEYS,
    "operators.fail": FAIL_KEYS,
    "expect": EXPECT_KEYS,
}
"""What the loader accepts, per table."""

COMMENTED_OUT = {"fail"}
"""Keys the examples may show only in a comment: uncommented, they would change the job."""


def blocks(path: Path) -> list[tuple[str, str]]:
    """``(info string, text)`` of every fenced code block of ``path``."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(path.read_text())]


def block_params(path: Path, info: str) -> list[object]:
    """One parameter per block of ``path`` whose info string is ``info``."""
    found = [text for kind, text in blocks(path) if kind == info]
    assert found, f"{path.name} has no ```{info} block"
    return [pytest.param(text, id=f"{path.stem}-{i}") for i, text in enumerate(found)]


def key_tables(path: Path) -> Iterator[tuple[str, list[str]]]:
    """``(section heading, keys)`` of every table whose first column is ``key``."""
    text = path.read_text()
    headings = [(m.start(), m.group(0)) for m in HEADING.finditer(text)]
    for table in re.finditer(r"^\| key[^\n]*\n\|[-| ]+\n((?:\|[^\n]*\n)+)", text, re.MULTILINE):
        heading = [h for start, h in headings if start < table.start()][-1]
        rows = table.group(1).splitlines()
        yield heading, [re.findall(r"`([^`]+)`", row.split("|")[1])[0] for row in rows]


def documented_scenario_keys() -> dict[str, list[str]]:
    """The keys docs/scenario.md documents, per TOML table."""
    documented: dict[str, list[str]] = {}
    for heading, keys in key_tables(SCENARIO_DOC):
        assert heading in SCENARIO_SECTIONS, f"a key table under {heading!r}: map it to its table"
        documented.setdefault(SCENARIO_SECTIONS[heading], []).extend(keys)
    return documented


def keys_in(document: Mapping[str, object]) -> set[tuple[str, str]]:
    """Every ``(table, key)`` a parsed scenario document uses."""
    used = {("", key) for key in document}
    for table in ("cluster", "network", "checkpoints", "monitor", "expect"):
        section = document.get(table, {})
        assert isinstance(section, Mapping)
        used |= {(table, key) for key in section}
    operators = document.get("operators", [])
    assert isinstance(operators, list)
    for op in operators:
        used |= {("operators", key) for key in op}
        used |= {("operators.inputs", key) for edge in op.get("inputs", []) for key in edge}
        used |= {("operators.fail", key) for key in op.get("fail", {})}
    return used


def commented_out(text: str) -> Iterator[tuple[str, str]]:
    """``(key, line uncommented)`` for every ``# key = ...`` line of a key in COMMENTED_OUT."""
    for line in text.splitlines():
        found = re.match(r"^# ([a-z_]+) = ", line)
        if found and found.group(1) in COMMENTED_OUT:
            yield found.group(1), line.removeprefix("# ")


def commented_keys(text: str) -> set[str]:
    """The keys (and table headers) on a line that ends with a comment (``key = 1  # what``)."""
    keys: set[str] = set()
    for line in text.splitlines():
        code, _, comment = line.removeprefix("# ").partition(" #")
        if comment.strip() and not code.startswith("#"):
            keys |= set(re.findall(r"([a-z_]+) =", code))
            keys |= set(re.findall(r"^\[\[?([a-z_]+)\]\]?", code))
    return keys


# --- every example in the docs loads -----------------------------------------------------------


@pytest.mark.parametrize("text", block_params(SCENARIO_DOC, "toml"))
def test_every_scenario_example_in_the_docs_loads(text: str) -> None:
    scenario = parse_scenario(text, "docs/scenario.md")
    assert scenario.operators


@pytest.mark.parametrize("text", block_params(TOPOLOGY_DOC, "toml"))
def test_every_topology_example_in_the_docs_loads(text: str) -> None:
    assert parse_topology_text(text, "docs/topology.md").operators


@pytest.mark.parametrize("text", block_params(TOPOLOGY_DOC, "toml profile"))
def test_every_profile_example_in_the_docs_loads(text: str) -> None:
    profile = parse_profile(tomllib.loads(text), "docs/topology.md")
    assert profile.backpressured


def test_the_documented_error_is_the_error_the_loader_gives() -> None:
    found = blocks(SCENARIO_DOC)
    kinds = [kind for kind, _ in found]
    bad = kinds.index("toml invalid")
    assert kinds[bad + 1] == "text", "the invalid example is followed by its message"
    message = found[bad + 1][1].strip()
    source = message.split(": ", 1)[0]
    with pytest.raises(ScenarioError) as info:
        parse_scenario(found[bad][1], source)
    assert str(info.value) == message


@pytest.mark.parametrize("text", block_params(REPORT_DOC, "json"))
def test_the_report_example_reads_back_and_writes_out_unchanged(text: str) -> None:
    document = json.loads(text)
    written = report_to_dict(report_from_json(text))
    assert json.dumps(written) == json.dumps(document), "fields, order or values differ"


# --- the key tables are the keys the loader accepts --------------------------------------------


def test_the_scenario_key_tables_list_exactly_the_keys_the_loader_accepts() -> None:
    documented = documented_scenario_keys()
    assert set(documented) == set(ACCEPTED)
    for table, keys in ACCEPTED.items():
        assert sorted(documented[table]) == sorted(keys), f"table {table or 'top level'}"


def test_the_topology_doc_lists_the_topology_keys_and_the_profile_keys() -> None:
    topology, profile = [keys for _, keys in key_tables(TOPOLOGY_DOC)]
    differences = set(OPERATOR_KEYS) ^ set(TOPOLOGY_OPERATOR_KEYS)
    assert sorted(differences) == ["fail", "threads"]
    assert differences <= set(topology)
    assert sorted(profile) == sorted(PROFILE_KEYS)


# --- the shipped examples show every key -------------------------------------------------------


def test_every_documented_key_is_in_a_shipped_example_with_a_comment() -> None:
    shown: set[tuple[str, str]] = set()
    commented: set[str] = set()
    for name in example_names():
        text = example_path(name).read_text()
        shown |= keys_in(tomllib.loads(text))
        for key, line in commented_out(text):
            shown |= {("operators", key)} | {
                (f"operators.{key}", sub) for sub in tomllib.loads(line)[key]
            }
        commented |= commented_keys(text)
    documented = {(t, k) for t, keys in documented_scenario_keys().items() for k in keys}
    assert sorted(documented - shown) == [], "documented keys no shipped example shows"
    assert sorted({k for _, k in documented} - commented) == [], "keys never commented"


def test_a_commented_out_key_loads_when_uncommented() -> None:
    count = 0
    for name in example_names():
        text = example_path(name).read_text()
        for key, line in commented_out(text):
            count += 1
            scenario = parse_scenario(text.replace(f"# {line}", line), name)
            assert any(getattr(op, key) is not None for op in scenario.operators)
    assert count >= 1


def test_the_demo_shows_the_monitor_and_network_tables_at_their_defaults() -> None:
    demo = tomllib.loads(example_path("demo").read_text())
    assert set(demo["monitor"]) == set(MONITOR_KEYS)
    assert set(demo["network"]) == set(ACCEPTED["network"])
    assert parse_scenario(example_path("demo").read_text()).network == NetworkConfig()


# --- links -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=str)
def test_every_relative_link_resolves(path: Path) -> None:
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        assert (path.parent / target.split("#")[0]).exists(), f"{path.name}: {target}"


def test_the_readme_links_the_three_formats() -> None:
    readme = (REPO / "README.md").read_text()
    formats = readme.split("## Formats", 1)[1].split("\n## ", 1)[0]
    for doc in ("docs/scenario.md", "docs/topology.md", "docs/report.md"):
        assert f"]({doc})" in formats


def _kinds_of_table(section: str) -> set[str]:
    """The backquoted first cells of the kind tables under ``section`` of docs/report.md (up to
    the next heading of the same or a higher level)."""
    text = REPORT_DOC.read_text()
    start = text.index(section)
    level = section.split(" ", maxsplit=1)[0]
    later = HEADING.finditer(text, start + 1)
    ends = [m.start() for m in later if len(m.group().split(" ")[0]) <= len(level)]
    end = min(ends, default=len(text))
    return set(re.findall(r"^\| `([a-z-]+)` \|", text[start:end], re.MULTILINE))


@pytest.mark.parametrize(
    ("section", "kinds"),
    [
        ("### Root cause kinds", get_args(CauseKind)),
        ("## `findings`", get_args(FindingKind)),
        ("## `autoscaler`", VERDICT_KINDS),
    ],
)
def test_the_report_doc_lists_every_kind_the_code_can_write(
    section: str, kinds: tuple[str, ...]
) -> None:
    documented = _kinds_of_table(section)
    assert documented >= set(kinds), f"missing from {section}: {sorted(set(kinds) - documented)}"


DOCSTRING_PATH = re.compile(
    r"(?<![\w/.:-])([\w.-]+(?:/[\w.-]+)+\.(?:py|md|toml|yml|yaml|json|jsonl|html|css|js|java|txt))\b"
)
"""A file path a docstring names: a folder and a file with one of the repo's extensions."""


def _docstring_paths() -> Iterator[tuple[str, str]]:
    """(module, path) for every file path named in a docstring of bpmon/ (a path with an
    upper-case placeholder such as ``docs/NAME.md`` is a pattern, not a file)."""
    for module in sorted((REPO / "bpmon").rglob("*.py")):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
                continue
            for match in DOCSTRING_PATH.finditer(ast.get_docstring(node, clean=False) or ""):
                path = match.group(1)
                if not path.startswith(".") and not any(
                    part.isupper() for part in re.split(r"[/.]", path)
                ):
                    yield str(module.relative_to(REPO)), path


def test_every_file_a_docstring_names_exists() -> None:
    """From the repository's root, the package's, or the module's own folder."""
    missing = [
        f"{module}: {path}"
        for module, path in _docstring_paths()
        if not any(
            (base / path).exists() for base in (REPO, REPO / "bpmon", (REPO / module).parent)
        )
    ]
    assert not missing
