"""docs/history.md against the code: the column tables are the schema, the JSON keys the values."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from bpmon.history.schema import HISTORY_SCHEMA, TABLES
from bpmon.model.analysis import (
    Analysis,
    AutoscalerHistory,
    CheckpointHistory,
    ChronicBottleneck,
    JobHistory,
    Regression,
    RunCheckpoints,
    SkewedSubtask,
    Thresholds,
    VerdictTally,
    VertexHistory,
)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "history.md").read_text()
README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def table_after(heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after ``heading``."""
    section = DOC.split(heading, 1)[1]
    rows = re.findall(r"^\|(.*)\|$", section.split("\n## ", 1)[0], re.MULTILINE)
    return [[c.strip() for c in row.split("|")] for row in rows[2:]]


@pytest.mark.parametrize("table", list(TABLES))
def test_the_column_tables_are_the_declared_schema(table: str) -> None:
    rows = table_after(f"## `{table}`")
    documented = [(r[0].strip("`"), r[1], r[2] == "yes", r[3]) for r in rows]
    declared = [(c.name, c.kind, c.nullable, c.doc) for c in TABLES[table]]  # type: ignore[index]
    assert documented == declared


def test_the_schema_version_is_documented() -> None:
    assert f"`{HISTORY_SCHEMA}`" in DOC


def test_the_json_table_lists_every_key_of_the_analysis() -> None:
    rows = {r[0].strip("`"): r[1] for r in table_after("## The analysis as JSON")}
    assert list(rows) == [f.name for f in fields(Analysis)]
    nested = {
        "thresholds": Thresholds,
        "jobs": JobHistory,
        "vertices": VertexHistory,
        "chronic": ChronicBottleneck,
        "regressions": Regression,
        "skew": SkewedSubtask,
        "checkpoints": CheckpointHistory,
        "autoscaler": AutoscalerHistory,
    }
    for key, cls in nested.items():
        for f in fields(cls):
            assert f"`{f.name}`" in rows[key], f"{key}.{f.name} is not documented"
    for f in fields(RunCheckpoints):  # checkpoints.by_run
        assert f"`{f.name}`" in rows["checkpoints"].split("`by_run`", 1)[1], f"by_run.{f.name}"
    for f in fields(VerdictTally):  # autoscaler.verdicts
        assert f"`{f.name}`" in rows["autoscaler"].split("`verdicts`", 1)[1], f"verdicts.{f.name}"


def test_the_readme_links_the_history_doc_and_documents_the_commands() -> None:
    assert "](docs/history.md)" in README
    assert "### `bpmon analyze" in README and "### `bpmon history" in README
