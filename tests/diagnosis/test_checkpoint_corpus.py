"""The checkpoint cases of the diagnosis corpus, each run on the real runtime: the root cause its
``[expect]`` names, the checkpoint findings it must carry and those it must not.

The cases (``tests/benchmarks/corpus/checkpoints-*.toml``, category ``checkpoints``) give their
arithmetic in their leading comments: aligned, unaligned and aligned-then-unaligned checkpoints
behind a slow operator, debloated buffers, a fan-in's alignment, a flatmap blocked mid-record and
one with overdraft buffers, a hot key and a slow subtask that skew the start delays, a large state
slow to upload (completing, and expiring), a legacy source, a healthy job. A window the runtime
counts as saturated describes the Python process, not the job: it is taken once more, as the
benchmark does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bpmon.model.values import Report
from bpmon.scenario import load_expectation, load_scenario

from .watched import watch_once

CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "corpus"
CASES = sorted(CORPUS.glob("checkpoints-*.toml"))
TRIES = 2


def test_the_corpus_has_a_dozen_checkpoint_cases_of_every_kind() -> None:
    assert len(CASES) >= 12
    wanted = {k for path in CASES if (e := load_expectation(path)) is not None for k in e.findings}
    assert {"checkpoint-backpressure", "checkpoint-slow", "checkpoint-skew"} <= wanted
    modes = {load_scenario(path).checkpoints.mode for path in CASES}
    assert modes == {"aligned", "unaligned"}
    assert any(load_scenario(path).network.debloat for path in CASES)


def _diagnosed(path: Path, runs_dir: Path) -> Report:
    scenario = load_scenario(path)
    for _ in range(TRIES):
        report, ended = watch_once(scenario, runs_dir)
        assert ended.leaks == (), ended.leaks
        if not any(f.kind == "runtime-saturated" for f in report.findings):
            return report
    pytest.fail(f"{path.stem}: the runtime was saturated in {TRIES} windows: {report.findings}")


@pytest.mark.slow
@pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
def test_a_checkpoint_case_gets_its_cause_and_its_checkpoint_findings(
    path: Path, tmp_path: Path
) -> None:
    expected = load_expectation(path)
    assert expected is not None
    report = _diagnosed(path, tmp_path)
    causes = report.root_causes or ()
    shown = f"causes {[(c.vertex, c.kind) for c in causes]}, findings {report.findings}"
    if expected.root_cause:
        assert causes and (causes[0].vertex, causes[0].kind) == (
            expected.root_cause,
            expected.kind,
        ), shown
        if expected.subtasks:
            assert sorted(causes[0].subtasks) == sorted(expected.subtasks), shown
    else:
        assert not causes, shown
    kinds = {f.kind for f in report.findings}
    assert set(expected.findings) <= kinds, shown
    assert not set(expected.without_findings) & kinds, shown
    checkpoints = report.checkpoints
    assert checkpoints is not None and checkpoints.last is not None, shown
    for finding in report.findings:
        if finding.kind == "checkpoint-backpressure":  # tied to the root cause, its figures
            assert causes and finding.vertex == causes[0].vertex, shown
            took = re.search(r"checkpoint (\d+) (?:took|failed after) ([\d,]+) ms", finding.detail)
            assert took is not None, finding.detail
            assert int(took[1]) == checkpoints.last.id
            assert int(took[2].replace(",", "")) == round(checkpoints.last.duration_ms)
        if finding.kind == "checkpoint-slow":  # the vertex with the largest async phase
            heaviest = max(checkpoints.vertices, key=lambda v: v.async_ms or 0.0)
            assert finding.vertex == heaviest.name, shown
