"""The tree is the architecture: no import cycle between modules, and few modules loose at the top.

import-linter's contracts (pyproject.toml) check that imports point down between packages; these
tests check what they cannot: that no two modules import each other, directly or round a loop,
even through imports made only for type hints (``if TYPE_CHECKING:``), since a cycle is a cycle
for the reader whether or not Python runs it.
"""

from __future__ import annotations

import ast
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


FLINK = "bpmon.collectors.flink"
FLINK_DOORS = {f"{FLINK}.target", f"{FLINK}.rescale"}
"""What the rest of bpmon may reach of the Flink collector: a target to watch and a rescale.
Its REST client, paths and field names stay inside it."""


def test_only_the_flink_collector_knows_flinks_rest_api(graph: grimp.ImportGraph) -> None:
    """No module outside ``collectors/flink/`` imports its REST client or parsers: they see a
    target (:class:`~bpmon.collectors.flink.target.FlinkTarget`) and a rescale, nothing else."""
    inside = graph.find_descendants(FLINK) | {FLINK}
    reached = {
        (importer, imported)
        for imported in inside - FLINK_DOORS
        for importer in graph.find_modules_that_directly_import(imported)
        if importer not in inside
    }
    assert not reached, f"outside {FLINK}, imports of its insides: {sorted(reached)}"


SURFACES = ("render", "web", "history")
INTERFACES = {"mount"}
"""Names a module offers as its interface, always called through it (``pages.mount(app)``,
``apidocs.mount(app)``), as Starlette's ``mount``: the same name in two modules is the point."""


def _functions() -> Iterator[tuple[str, str, str]]:
    """Every module-level function of the surface packages: its name, its module, and its body
    without its docstring, as an AST dump (what the function does, whatever it is called)."""
    root = Path(bpmon.__file__).parent
    for package in SURFACES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    body = node.body
                    if (
                        body
                        and isinstance(body[0], ast.Expr)
                        and isinstance(getattr(body[0], "value", None), ast.Constant)
                    ):
                        body = body[1:]
                    shape = ast.dump(ast.Module(body=body, type_ignores=[]))
                    yield node.name, str(path.relative_to(root)), ast.dump(node.args) + shape


def test_no_two_surface_modules_define_the_same_helper() -> None:
    """Across ``render/``, ``web/`` and ``history/``: a public function name is defined once
    (two of one name are one helper written twice, or two things that deserve names of their
    own), and no two functions, private ones included, do the same thing under two names (the
    "round, or None if not finite" helper once was written three times)."""
    names: dict[str, list[str]] = {}
    bodies: dict[str, list[str]] = {}
    for name, module, shape in _functions():
        if not name.startswith("_") and name not in INTERFACES:
            names.setdefault(name, []).append(module)
        bodies.setdefault(shape, []).append(f"{module}:{name}")
    twice = {name: modules for name, modules in names.items() if len(modules) > 1}
    assert not twice, f"public helpers defined in more than one module: {twice}"
    same = [where for where in bodies.values() if len({w.split(":")[0] for w in where}) > 1]
    assert not same, f"one function written in more than one module: {same}"
