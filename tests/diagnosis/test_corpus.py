"""The diagnosis corpus (``tests/benchmarks/corpus/``) is complete: every file loads as a scenario,
has an ``[expect]`` table, a known category and a part of the split, and every category is in both
parts, so the held-out score covers every pattern. Read through the same module the benchmark
uses (``tests/benchmarks/diagnosis_corpus.py``). Nothing here runs a job or scores bpmon.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

MODULE = Path(__file__).resolve().parents[1] / "benchmarks" / "diagnosis_corpus.py"
MIN_CASES = 80


def _load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("diagnosis_corpus", MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("diagnosis_corpus", module)
    spec.loader.exec_module(module)
    return module


corpus = _load_module()


@pytest.fixture(scope="module")
def cases() -> list[Any]:
    return list(corpus.load_corpus())


def test_every_file_is_a_case(cases: list[Any]) -> None:
    assert len(cases) == len(corpus.corpus_files())
    assert len(cases) >= MIN_CASES


def test_every_case_has_an_expectation_a_category_and_a_split(cases: list[Any]) -> None:
    for case in cases:
        assert case.category in corpus.CATEGORIES, case.name
        assert case.split in corpus.SPLITS, case.name
        if case.healthy:
            assert not case.subtasks, case.name
        else:
            assert case.expected[0][1] in corpus.CAUSE_KINDS, case.name


def test_every_category_is_in_both_parts(cases: list[Any]) -> None:
    parts = {(case.category, case.split) for case in cases}
    missing = [
        f"{category} ({split})"
        for category in corpus.CATEGORIES
        for split in corpus.SPLITS
        if (category, split) not in parts
    ]
    assert not missing, f"categories absent from a part: {', '.join(missing)}"


def test_the_held_out_part_is_the_larger_one(cases: list[Any]) -> None:
    counts = Counter(case.split for case in cases)
    share = counts["tuning"] / len(cases)
    assert 0.3 <= share <= 0.5, counts


def test_a_file_without_its_tags_is_refused(tmp_path: Path) -> None:
    source = corpus.corpus_files()[0].read_text()
    untagged = "\n".join(
        line for line in source.splitlines() if not line.startswith(("# category:", "# split:"))
    )
    path = tmp_path / "untagged.toml"
    path.write_text(untagged)
    with pytest.raises(corpus.CorpusError, match=r"# category: \?"):
        corpus.load_case(path, {})
    path.write_text("# category: chain\n" + untagged)
    with pytest.raises(corpus.CorpusError, match=r"# split: \?"):
        corpus.load_case(path, {})


def test_a_file_without_expect_is_refused(tmp_path: Path) -> None:
    source = corpus.corpus_files()[0].read_text()
    path = tmp_path / "no-expect.toml"
    path.write_text(source.split("[expect]")[0])
    with pytest.raises(corpus.CorpusError, match=r"no \[expect\] table"):
        corpus.load_case(path, {})
