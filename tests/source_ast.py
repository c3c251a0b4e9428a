"""``ast.parse`` for the tests that read the project's sources, safe while other threads run.

CPython 3.11 keeps the AST builder's recursion depth in interpreter-wide state, so a parse in
one thread fails with ``SystemError: AST constructor recursion depth mismatch`` when another
thread parses at the same moment (python/cpython#106905, fixed in 3.12). In 3.11 that other
parse can be any traceback being formatted (its caret anchors parse the source line), e.g. a
service's background thread left by an earlier test logging an exception. The parse is pure,
so a retry is exact.
"""

from __future__ import annotations

import ast

ATTEMPTS = 20


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source)``, retried when another thread's parse broke it (see the module)."""
    for _ in range(ATTEMPTS - 1):
        try:
            return ast.parse(source, filename)
        except SystemError as error:
            if "recursion depth mismatch" not in str(error):
                raise
    return ast.parse(source, filename)
