"""The import graph of shared/mots: no cycle (lazy in-function imports count), layers point inward.

The graph is read from the source with ``ast``: every ``import``/``from … import`` anywhere in a
module (at the top, in a function, under ``TYPE_CHECKING``) is an edge to the innermost module of
``mots`` it names. Importing a package's submodule does not count as importing the package's
``__init__`` (Python initialises the parent first, but the submodule uses none of its names).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.source_ast import parse

ROOT = Path(__file__).resolve().parents[2] / "shared"
PACKAGE = "mots"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name → source file, for every module of ``package`` under ``root``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _innermost(name: str, known: Iterable[str]) -> str | None:
    """The longest known module that ``name`` is or lies in (``a.b.f`` → ``a.b``)."""
    names = set(known)
    while name and name not in names:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports (anywhere in its body)."""
    mods = modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module
                targets.update(f"{base}.{a.name}" for a in node.names)
        resolved = {_innermost(t, mods) for t in targets if t.split(".")[0] == package}
        graph[name] = {t for t in resolved if t is not None and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, …, a]``, or None when the graph is acyclic."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            nxt = todo.pop()
            if nxt in on_path:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in done:
                stack.append((nxt, sorted(graph.get(nxt, ()))))
                path.append(nxt)
                on_path.add(nxt)
    return None


def test_shared_mots_has_no_import_cycle() -> None:
    """No chain of imports inside shared/mots leads back to where it started."""
    graph = import_graph(ROOT, PACKAGE)
    assert "mots.economics.best_response" in graph  # the graph sees the whole package
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


@pytest.mark.parametrize(
    ("layer", "may_import"),
    [
        ("mots.economics", ("mots.economics",)),
        # mots.scenario_file is a leaf above the core (it imports only mots.economics): the
        # round's quotes (mots.platform.quotes) read a scenario document through it.
        ("mots.platform", ("mots.platform", "mots.economics", "mots.scenario_file")),
        ("mots.client", ("mots.client", "mots.platform", "mots.economics", "mots.scenario_file")),
    ],
)
def test_layers_import_only_inward(layer: str, may_import: tuple[str, ...]) -> None:
    """The economics core imports no other part of mots; the services' glue and the client SDK
    import no training, CLI or local-stack code."""
    graph = import_graph(ROOT, PACKAGE)
    stray = {
        (m, t)
        for m, targets in graph.items()
        if m == layer or m.startswith(layer + ".")
        for t in targets
        if not any(t == ok or t.startswith(ok + ".") for ok in may_import)
    }
    assert not stray, sorted(stray)


def test_cycle_finder_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """A cycle closed by an in-function import or a relative import is found (the check can fail)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n    return g\n")
    (pkg / "c.py").write_text("import os\n\ndef g():\n    import pkg.a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (pkg / "c.py").write_text("import os\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
