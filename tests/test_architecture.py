"""The tree is the architecture: no import cycle between modules, and few modules loose at the top.

import-linter's contracts (pyproject.toml) check that imports point down between packages; these
tests check what they cannot: that no two modules import each other, directly or round a loop,
even through imports made only for type hints (``if TYPE_CHECKING:``), since a cycle is a cycle
for the reader whether or not Python runs it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import grimp
import pytest

import bpmon

MAX_LOOSE_MODULES = 6


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """bpmon's imports, those under ``if TYPE_CHECKING:`` included."""
    return grimp.build_graph("bpmon", exclude_type_checking_imports=False)


def strongly_connected(edges: Mapping[str, set[str]]) -> Iterator[list[str]]:
    """Tarjan's strongly connected components of the graph ``edges`` (iterative, sorted members)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                yield sorted(component)


def test_strongly_connected_finds_a_loop_and_leaves_a_chain() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set[str]()}
    assert sorted(strongly_connected(edges)) == [["a", "b", "c"], ["d"], ["e"]]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one bpmon module."""
    return [c for c in strongly_connected(_edges(graph)) if len(c) > 1]


def test_a_module_and_its_own_package_importing_each_other_is_a_cycle() -> None:
    """``bpmon/x/__init__.py`` importing ``bpmon.x.a`` while ``a`` imports ``bpmon.x`` is found."""
    graph = grimp.ImportGraph()
    for module in ("bpmon", "bpmon.x", "bpmon.x.a", "bpmon.x.b"):
        graph.add_module(module)
    graph.add_import(importer="bpmon.x", imported="bpmon.x.a", line_number=3, line_contents="")
    graph.add_import(importer="bpmon.x.a", imported="bpmon.x", line_number=5, line_contents="")
    graph.add_import(importer="bpmon.x.b", imported="bpmon.x.a", line_number=1, line_contents="")
    assert _cycles(graph) == [["bpmon.x", "bpmon.x.a"]]


def _edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Each bpmon module and the bpmon modules it imports directly."""
    return {
        module: {
            m for m in graph.find_modules_directly_imported_by(module) if m.startswith("bpmon")
        }
        for module in graph.modules
        if module.startswith("bpmon")
    }


def _loop(graph: grimp.ImportGraph, component: list[str]) -> str:
    """Each import inside ``component`` with its line: what a reader needs to break the cycle."""
    first, members = component[0], set(component)
    steps: list[str] = []
    for importer in (first, *sorted(members - {first})):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            lines = graph.get_import_details(importer=importer, imported=imported)
            where = ", ".join(f"line {d['line_number']}" for d in lines)
            steps.append(f"    {importer} -> {imported} ({where})")
    return "\n".join(steps)


def test_no_import_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    """No strongly connected component of more than one module.

    A package's ``__init__`` is a module like any other here, so a module that imports its own
    package while the package imports it back is a cycle too.
    """
    cycles = _cycles(graph)
    described = "\n".join(f"  {' <-> '.join(c)}:\n{_loop(graph, c)}" for c in cycles)
    assert not cycles, f"{len(cycles)} import cycle(s) between modules:\n{described}"


def test_few_modules_loose_in_the_package_root() -> None:
    root = Path(bpmon.__file__).parent
    loose = sorted(p.stem for p in root.glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, f"modules loose in bpmon/: {loose}"
