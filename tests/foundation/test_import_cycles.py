"""Import cycles, counted the way a reader meets them.

A module that imports another inside a function still depends on it: the
cycle is only deferred to the first call, and a newcomer following the
imports still walks in a circle. So the graph here has an edge for every
``import`` anywhere in a module (``if TYPE_CHECKING:`` blocks left out: they
never run), over every distribution in ``packages/``, and the rule is the
one the layout follows: no cycle of more than two modules, and each
two-module cycle named below with the reason it stays.

A cycle of more than two modules fails (:data:`KNOWN_CYCLES` is empty and
stays so); a two-module cycle fails unless :data:`KNOWN_PAIRS` names it with
the reason it stays, and a listed pair that is gone fails until it is
removed from the list.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import ROOT

#: Cycles of more than two modules: none. The last one (the default
#: configuration's hub, reached by the client, the data API and the testing
#: modes) was broken by making ``wurk.config.defaults`` a leaf and letting the
#: testing modes plug into the client from above. Nothing may be added here.
KNOWN_CYCLES: set[frozenset[str]] = set()

#: Two-module cycles, each with why it stays (none so far: each pair found
#: was broken, by a leaf module both sides import or by a registration).
KNOWN_PAIRS: dict[frozenset[str], str] = {}


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for init in sorted((ROOT / "packages").glob("*/src/*/__init__.py")):
        top = init.parent
        for path in top.rglob("*.py"):
            parts = path.relative_to(top.parent).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for inner in node.body:
                lines.update(n.lineno for n in ast.walk(inner) if hasattr(n, "lineno"))
    return lines


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The modules of ``known`` that ``name`` imports, anywhere in it."""
    tree = ast.parse(path.read_text("utf-8"))
    skip = type_checking_lines(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            # A module importing its own package (``wurk.x`` → ``wurk``) is how
            # every import starts, not a dependency on what the package holds.
            if target and target != name and not name.startswith(target + "."):
                yield target


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_new_import_cycle_and_the_known_ones_only_shrink():
    known = modules()
    graph = {name: set(imported(name, path, known)) for name, path in known.items()}
    found = set(cycles(graph))
    large = {cycle for cycle in found if len(cycle) > 2}
    pairs = {cycle for cycle in found if len(cycle) == 2}
    assert large - KNOWN_CYCLES == set(), "a new import cycle of more than two modules"
    assert KNOWN_CYCLES - large == set(), "a known cycle was broken or changed: update KNOWN_CYCLES"
    assert pairs - set(KNOWN_PAIRS) == set(), "a new two-module cycle: break it, or say in KNOWN_PAIRS why it stays"
    assert set(KNOWN_PAIRS) - pairs == set(), "a listed pair is gone: remove it from KNOWN_PAIRS"


def test_an_import_inside_a_function_counts_and_one_for_type_checking_does_not(tmp_path):
    module = tmp_path / "a.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pkg import c\n"
        "def later():\n"
        "    from pkg.b import thing\n"
        "    return thing\n"
    )
    known = {"pkg.a": module, "pkg.b": module, "pkg.c": module}
    assert list(imported("pkg.a", module, known)) == ["pkg.b"]
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
