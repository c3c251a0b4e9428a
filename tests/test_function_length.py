"""No function in shared/, services/ or edge/ is longer than 100 lines, from its ``def`` to its last
line (docstring, comments and blank lines inside it included; decorators not)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("shared", "services", "edge")
MAX_LINES = 100

EXCEPTIONS: dict[str, str] = {}
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

    visit(ast.parse(source), "")
    return out


def _all_lengths() -> dict[str, int]:
    out = {}
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for name, lines in function_lengths(path.read_text()).items():
                out[f"{rel}::{name}"] = lines
    return out


def test_no_function_is_over_100_lines() -> None:
    """Every function in shared/, services/ and edge/ fits in 100 lines (but the listed ones)."""
    lengths = _all_lengths()
    assert len(lengths) > 500  # the walk sees the code
    over = {name: n for name, n in lengths.items() if n > MAX_LINES and name not in EXCEPTIONS}
    assert not over, "split these (lines from `def` to the last line): " + ", ".join(
        f"{name} ({n})" for name, n in sorted(over.items())
    )


def test_every_exception_is_still_needed() -> None:
    """An exception whose function got shorter (or went) is removed from the list."""
    lengths = _all_lengths()
    stale = [name for name in EXCEPTIONS if lengths.get(name, 0) <= MAX_LINES]
    assert not stale, f"no longer over {MAX_LINES} lines: remove from EXCEPTIONS: {stale}"


def test_the_count_runs_from_def_to_the_last_line_and_can_fail() -> None:
    """A 101-line method is caught by name; decorators do not count, nested functions do."""
    body = "\n".join(f"        x{i} = {i}" for i in range(99))
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
    assert lengths == {"Book.long": 101, "outer": 4, "outer.inner": 2}
    assert {n for n, lines in lengths.items() if lines > MAX_LINES} == {"Book.long"}
