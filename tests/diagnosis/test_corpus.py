"""The diagnosis corpus (``tests/benchmarks/corpus/``) is complete: every file loads as a scenario,
has an ``[expect]`` table, a known category and a part of the split, and every category is in both
parts, so the held-out score covers every pattern. Read through the same module the benchmark
uses (``tests/benchmarks/diagnosis_corpus.py``). Nothing here runs a job or scores bpmon.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
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


FIRST_SPLIT = corpus.CORPUS / "first-split.txt"
SPLIT_COMMIT = "4551685"
"""The commit that drew the first split (87 files)."""


def first_split() -> dict[str, str]:
    """The files of the first split and their parts (``first-split.txt``)."""
    lines = [line.split() for line in FIRST_SPLIT.read_text().splitlines()]
    return {stem: part for stem, part in (line for line in lines if line and line[0] != "#")}


def by_hash(stem: str) -> str:
    """The part a file added after the first split takes: tuning for 40% of the hashes."""
    return "tuning" if int(hashlib.sha256(stem.encode()).hexdigest(), 16) % 100 < 40 else "held-out"


def test_the_first_split_keeps_its_parts_and_later_files_follow_the_hash_rule(
    cases: list[Any],
) -> None:
    first = first_split()
    assert len(first) == 87
    for case in cases:
        expected = first.get(case.name, by_hash(case.name))
        assert case.split == expected, f"{case.name}: split {case.split}, the rule says {expected}"


def comments_only(repo: Path, commit: str, path: Path) -> bool:
    """Whether ``commit`` changed only comments and blank lines of ``path`` (a comment is the
    physics told, and its records of edits: not a change of the job)."""
    diff = subprocess.run(
        ["git", "show", "--format=", "-U0", commit, "--", str(path)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    changed = [
        line[1:].strip()
        for line in diff
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return all(not line or line.startswith("#") for line in changed)


def test_an_edit_of_a_held_out_file_after_the_split_is_recorded_in_it() -> None:
    """Every commit after the split that changed a held-out file's job (beyond the one that
    added it; comments aside) is named in the file: '# edited after the split, DATE (HASH): what
    and why'."""
    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: the history of the corpus cannot be read")
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"],
        check=False,
        cwd=repo,
        capture_output=True,
        text=True,
    )
    if shallow.stdout.strip() != "false":
        pytest.skip("a shallow clone: the history of the corpus is incomplete")
    for path in corpus.corpus_files():
        text = path.read_text()
        if "# split: held-out" not in text:
            continue
        log = subprocess.run(
            ["git", "log", "--format=%h", f"{SPLIT_COMMIT}..HEAD", "--", str(path)],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        added = subprocess.run(
            ["git", "log", "--diff-filter=A", "--format=%h", "--", str(path)],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        recorded = set(re.findall(r"# edited after the split, [\d-]+ \((\w+)\)", text))
        for commit in log:
            if commit in added or comments_only(repo, commit, path):
                continue
            assert any(commit.startswith(r) or r.startswith(commit) for r in recorded), (
                f"{path.name}: commit {commit} changed this held-out file after the split; "
                "record it in the file ('# edited after the split, DATE (HASH): why')"
            )
