"""The diagnosis corpus: every scenario of ``corpus/``, its expected diagnosis, category and split.

A corpus file is a scenario file (``docs/scenario.md``) whose ``[expect]`` table gives the primary
bottleneck (``root_cause``, ``kind``, ``subtasks``; ``root_cause = ""`` for a healthy job). Its
leading comment explains the physics (offered rate against capacity, links, skew) and carries two
tags the scenario loader ignores, because comments are not keys:

    # category: sub-pipeline
    # split: held-out

Further bottlenecks of a job with several are listed in ``corpus/expected_extra.toml``, keyed by
file stem (``also = [{ vertex = ..., kind = ... }]``), as ``[expect]`` takes one root cause only.

The split is fixed: thresholds may be tuned on the ``tuning`` part only, and the ``held-out`` part
is what the diagnosis is scored on. ``corpus/README.md`` says how it was drawn. Both the benchmark
(``bench_diagnosis.py``) and the corpus test (``tests/diagnosis/test_corpus.py``) read the corpus
through this module, so the test checks exactly what the benchmark runs.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from bpmon.model.values import CauseKind
from bpmon.scenario import load_expectation, load_scenario

CORPUS = Path(__file__).resolve().parent / "corpus"
EXTRA = CORPUS / "expected_extra.toml"
SPLITS = ("tuning", "held-out")
CAUSE_KINDS: tuple[str, ...] = get_args(CauseKind)

CATEGORIES: Mapping[str, str] = {
    "chain": "a linear pipeline with one operator short of capacity",
    "diamond": "a split into branches that a union joins again",
    "fan-in": "several sources or inputs into one operator",
    "fan-out": "one producer feeding several consumers, one of them slow",
    "broadcast": "a broadcast exchange multiplying the load on every subtask",
    "hot-key": "a hash exchange whose hot key overloads one subtask",
    "slow-subtask": "one slow instance with a fair share of the records",
    "slow-sink": "the external system behind a sink is the limit",
    "network": "a capped link between task managers is the limit",
    "capped-fan-out": "a fan-out with one branch behind a capped link and a busy sibling",
    "sub-pipeline": "forward lanes with an independent slow instance in two of them",
    "tcp": "legacy TCP flow control with an operator short of capacity",
    "stall": "a job in which no record moves: a cycle of waits",
    "multi": "two bottlenecks at once, in series or side by side",
    "healthy": "no bottleneck, some operators 80-90% busy: nothing may be named",
    "zipf": "Zipf keys routed by key groups: the hot subtask overloaded, or a mild Zipf that fits",
    "noisy": "noisy costs (cost_cv 0.3-1.0): a slow operator, or healthy at 80-90% busy",
    "bursty": "sources that vary (bursts, ramps, steps, a wave, uneven subtasks, a backlog)",
    "memory": "state beyond its managed memory spills: the operator short of capacity, or fits",
    "branching-chain": "chaining = true: a slow member of a branching chain, a chained source",
    "latency": "latency_ms x few credits limits a remote channel, or latency/tight credit that fit",
    "checkpoints": "checkpoints held by backpressure, skewed, slow for their own state, or quick",
}


class CorpusError(ValueError):
    """A corpus file is incomplete or inconsistent; the message names the file and the fix."""


@dataclass(frozen=True, slots=True)
class Case:
    """One corpus scenario and what its diagnosis must find.

    Attributes:
        expected: every expected bottleneck, primary first, as ``(vertex, kind)``; empty for a
            healthy job.
        subtasks: the subtasks the primary cause must name (may be empty).
    """

    name: str
    path: Path
    category: str
    split: str
    expected: tuple[tuple[str, str], ...]
    subtasks: tuple[int, ...] = ()

    @property
    def vertices(self) -> frozenset[str]:
        """The names of the expected bottlenecks."""
        return frozenset(vertex for vertex, _ in self.expected)

    @property
    def healthy(self) -> bool:
        """No bottleneck is expected."""
        return not self.expected

    @property
    def stalled(self) -> bool:
        """The job is expected to stop moving records (kind ``stalled``)."""
        return bool(self.expected) and self.expected[0][1] == "stalled"

    def kind_of(self, vertex: str) -> str | None:
        """The expected kind of cause at ``vertex``; None when it is no expected bottleneck."""
        return dict(self.expected).get(vertex)


def header_tags(path: Path) -> dict[str, str]:
    """The ``# key: value`` lines of the file's leading comment (before its first key)."""
    tags: dict[str, str] = {}
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        key, sep, value = stripped.lstrip("#").strip().partition(":")
        if sep and key.strip() in ("category", "split"):
            tags[key.strip()] = value.strip()
    return tags


def load_case(path: Path, extra: Mapping[str, object]) -> Case:
    """One corpus file as a :class:`Case`.

    Raises:
        CorpusError: no ``[expect]``, no or an unknown category or split, or a bad extra entry.
        ScenarioError: the scenario itself does not load.
    """
    names = {op.name for op in load_scenario(path).operators}
    expectation = load_expectation(path)
    if expectation is None:
        raise CorpusError(f"{path}: no [expect] table; every corpus scenario needs one")
    tags = header_tags(path)
    category, split = tags.get("category"), tags.get("split")
    if category is None or category not in CATEGORIES:
        raise CorpusError(
            f"{path}: leading comment line '# category: {category or '?'}': expected one of "
            f"{', '.join(CATEGORIES)}"
        )
    if split is None or split not in SPLITS:
        raise CorpusError(
            f"{path}: leading comment line '# split: {split or '?'}': expected one of "
            f"{', '.join(SPLITS)} (see corpus/README.md for how a new file gets its part)"
        )
    primary = [(expectation.root_cause, expectation.kind or "")] if expectation.root_cause else []
    table = extra.get(path.stem, {})
    also = extra_expected(path, names, table if isinstance(table, Mapping) else {})
    if also and not primary:
        raise CorpusError(f"{EXTRA}: [{path.stem}] lists bottlenecks of a job expected healthy")
    return Case(path.stem, path, category, split, (*primary, *also), expectation.subtasks)


def extra_expected(
    path: Path, names: set[str], table: Mapping[str, object]
) -> list[tuple[str, str]]:
    """The further bottlenecks ``expected_extra.toml`` lists for ``path``, checked."""
    entries = table.get("also", [])
    out = []
    for entry in entries if isinstance(entries, list) else [entries]:
        vertex, kind = (
            (entry.get("vertex"), entry.get("kind")) if isinstance(entry, dict) else ("", "")
        )
        if vertex not in names or kind not in CAUSE_KINDS:
            raise CorpusError(
                f"{EXTRA}: [{path.stem}] also = {entry!r}: expected {{ vertex = an operator of "
                f"{path.name}, kind = one of {', '.join(CAUSE_KINDS)} }}"
            )
        out.append((str(vertex), str(kind)))
    return out


def corpus_files() -> list[Path]:
    """Every scenario file of the corpus, sorted by name."""
    return sorted(path for path in CORPUS.glob("*.toml") if path != EXTRA)


def load_corpus(only: str | None = None) -> list[Case]:
    """The corpus, sorted by name (``only``: just the scenario with that file stem).

    Raises:
        CorpusError: a file is incomplete, ``expected_extra.toml`` names an unknown file, or
            ``only`` matches nothing.
    """
    extra = tomllib.loads(EXTRA.read_text()) if EXTRA.exists() else {}
    files = corpus_files()
    unknown = sorted(set(extra) - {path.stem for path in files})
    if unknown:
        raise CorpusError(f"{EXTRA}: no corpus file for [{', '.join(unknown)}]")
    if only is not None:
        files = [path for path in files if path.stem == only.removesuffix(".toml")]
        if not files:
            raise CorpusError(f"no corpus scenario named {only!r} in {CORPUS}")
    return [load_case(path, extra) for path in files]
