"""No function in shared/, services/ or edge/ is longer than 80 lines, from its ``def`` to its last
line (docstring, comments and blank lines inside it included; decorators not). The economics core
(shared/mots/economics) may have functions up to 100 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_ast import parse

ROOT = Path(__file__).resolve().parents[1]
TREES = ("shared", "services", "edge")
MAX_LINES = 80
ECONOMICS = "shared/mots/economics/"
ECONOMICS_MAX_LINES = 100

EXCEPTIONS: dict[str, str] = {
    "services/market/alembic/versions/0001_market_tables.py::_create_tables_with_references": (
        "an applied migration: its text stays as deployed databases ran it"
    ),
}
"""Functions over the limit for now, each with the reason; an entry that is no longer over fails."""


def function_lengths(source: str) -> dict[str, int]:
    """Lines of every function and method in ``source``, by qualified name (``Outer.inner``)."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                assert child.end_lineno is not None
                out[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(parse(source), "")
    return out


def _all_lengths() -> dict[str, int]:
    out = {}
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for name, lines in function_lengths(path.read_text()).items():
                out[f"{rel}::{name}"] = lines
    return out


def limit(name: str) -> int:
    """The most lines the function ``path::name`` may have."""
    return ECONOMICS_MAX_LINES if name.startswith(ECONOMICS) else MAX_LINES


def test_no_function_is_over_80_lines() -> None:
    """Every function in shared/, services/ and edge/ fits in 80 lines (100 in the economics
    core), but the listed ones."""
    lengths = _all_lengths()
    assert len(lengths) > 500  # the walk sees the code
    over = {n: k for n, k in lengths.items() if k > limit(n) and n not in EXCEPTIONS}
    assert not over, "split these (lines from `def` to the last line): " + ", ".join(
        f"{name} ({n})" for name, n in sorted(over.items())
    )


def test_every_exception_is_still_needed() -> None:
    """An exception whose function got shorter (or went) is removed from the list."""
    lengths = _all_lengths()
    stale = [name for name in EXCEPTIONS if lengths.get(name, 0) <= limit(name)]
    assert not stale, f"no longer over {MAX_LINES} lines: remove from EXCEPTIONS: {stale}"


def test_the_count_runs_from_def_to_the_last_line_and_can_fail() -> None:
    """An 81-line method is caught by name; decorators do not count, nested functions do."""
    body = "\n".join(f"        x{i} = {i}" for i in range(79))
    source = (
        "import functools\n\n\n"
        "class Book:\n"
        "    @functools.cache\n"
        "    def long(self):\n"
        f"{body}\n"
        "        return x0\n\n\n"
        "def outer():\n"
        "    def inner():\n"
        "        return 1\n"
        "    return inner\n"
    )
    lengths = function_lengths(source)
    assert lengths == {"Book.long": 81, "outer": 4, "outer.inner": 2}
    assert {n for n, lines in lengths.items() if lines > MAX_LINES} == {"Book.long"}
