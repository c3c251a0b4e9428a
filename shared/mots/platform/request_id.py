"""A request id on every answer of every API: the ``X-Request-ID`` header, and ``request_id`` in
every problem body, so that a refusal a client reports can be found in the service's log.

A caller may send its own ``X-Request-ID`` (1-64 of ``A-Z a-z 0-9 . _ -``); otherwise the service
makes one (32 hex digits). :class:`RequestIdMiddleware` sets it for the request's task
(:func:`current`), adds the header to the answer and logs one line per refused or failed request
(logger ``mots.requests``: 5xx at ERROR, 4xx at WARNING, so that a refusal is in the log at the
services' default level; issue 40) with the method, path, status and id, which
`mots platform logs --request ID` finds.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import Any

log = logging.getLogger("mots.requests")

HEADER = "X-Request-ID"
_GIVEN = re.compile(r"[A-Za-z0-9._-]{1,64}")
_CURRENT: ContextVar[str | None] = ContextVar("mots_request_id", default=None)


def current() -> str | None:
    """The id of the request being answered (None outside a request)."""
    return _CURRENT.get()


def _chosen(headers: Any) -> str:
    for key, value in headers:
        if key == b"x-request-id":
            text: str = bytes(value).decode("latin-1")
            if _GIVEN.fullmatch(text):
                return text
            break
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Plain ASGI middleware: choose the request's id, answer it in ``X-Request-ID``, log it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _chosen(scope.get("headers", ()))
        _CURRENT.set(rid)
        status = 500

        async def tagged(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                if not any(k.lower() == b"x-request-id" for k, _ in headers):
                    headers.append((b"x-request-id", rid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, tagged)
        finally:
            if status >= 400:
                level = logging.ERROR if status >= 500 else logging.WARNING
                log.log(
                    level,
                    "%s %s -> %d request_id=%s",
                    scope.get("method"),
                    scope.get("path"),
                    status,
                    rid,
                )
