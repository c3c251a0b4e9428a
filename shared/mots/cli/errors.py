"""One error contract for every `mots` command (issue 40): a stable ``code`` per kind of error and
the exit status each code gives, in one table that docs/errors.md repeats (tests/test_docs.py
checks the two agree).

Without ``--json`` an error is one line, ``Error: …``, on stderr. With ``--json`` it is one JSON
line on stderr, ``{"error": {"code", "kind", "message", "exit_code", "status", "method", "path",
"request_id"}}``: ``code`` is never null (a service's refusal keeps the service's problem code,
docs/errors.md), and ``method``, ``path`` and ``request_id`` name the request where there was one
(null where none was made). A script branches on the exit status or on ``code``.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import click
import httpx

REFUSED = 1
"""A service answered with a refusal (any problem code of docs/errors.md), or a command failed."""
USAGE = 2
"""The command line or the configuration is wrong: nothing was sent."""
UNREACHABLE = 3
"""No service answered (connection refused, DNS, TLS), or it answered something unreadable."""
TIMEOUT = 4
"""A call or a wait ran out of time (``--timeout``, the HTTP client's own timeout)."""
NOT_PUBLISHED = 5
"""`mots rounds watch`: the round ended without publishing a model (settled by rule)."""

EXIT_CODES: dict[str, int] = {
    "usage": USAGE,
    "configuration": USAGE,
    "role": USAGE,
    "unreachable": UNREACHABLE,
    "bad-answer": UNREACHABLE,
    "timeout": TIMEOUT,
    "round-not-published": NOT_PUBLISHED,
    "failed": REFUSED,
}
"""The CLI's own codes and their exit statuses; every service problem code exits 1."""


def exit_code_of(code: str) -> int:
    """The exit status of ``code``: the CLI's own table, else 1 (a service's refusal)."""
    return EXIT_CODES.get(code, REFUSED)


def transport_code(exc: BaseException) -> str:
    """``timeout``, ``unreachable`` or ``bad-answer`` for an error with no HTTP status, from the
    ``httpx`` error that caused it (found along ``__cause__``)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.TimeoutException):
            return "timeout"
        if isinstance(seen, httpx.TransportError):
            return "unreachable"
        seen = seen.__cause__
    return "bad-answer"


def report(
    as_json: bool,
    code: str,
    message: str,
    *,
    kind: str | None = None,
    status: int | None = None,
    method: str | None = None,
    path: str | None = None,
    request_id: str | None = None,
) -> NoReturn:
    """Print the error (one line, JSON under ``as_json``) on stderr and exit with ``code``'s
    status. ``kind`` is the older coarse name (``refused``, ``usage``, …) kept for scripts."""
    exit_code = exit_code_of(code)
    if as_json:
        body: dict[str, Any] = {
            "code": code,
            "kind": kind or code,
            "message": message,
            "exit_code": exit_code,
            "status": status,
            "method": method or None,
            "path": path or None,
            "request_id": request_id,
        }
        click.echo(json.dumps({"error": body}), err=True)
    else:
        click.echo(f"Error: {message}", err=True)
    raise click.exceptions.Exit(exit_code)


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON (``--json`` before a ``--`` separator)."""
    head = args[: args.index("--")] if "--" in args else args
    return "--json" in head


class JsonErrorsGroup(click.Group):
    """The `mots` group: under ``--json``, a usage error (an unknown option, a bad value) or a
    command's own failure is the JSON line of :func:`report` too, not click's text."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """The context, remembering whether the whole command line asked for ``--json``."""
        as_json = wants_json(list(args))
        ctx = super().make_context(info_name, args, parent, **extra)
        ctx.meta["mots.as_json"] = as_json
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        """Run the sub-command; under ``--json`` report click's errors as one JSON line."""
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if not ctx.meta.get("mots.as_json"):
                raise
            usage = isinstance(exc, click.UsageError) or exc.exit_code == USAGE
            code = "usage" if usage else "failed"
            report(True, code, exc.format_message(), kind="usage" if usage else "refused")
