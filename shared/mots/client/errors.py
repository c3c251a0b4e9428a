"""The SDK's errors: what a refused, unreadable or unreachable call raises, and how a service's
RFC 9457 problem answer is read into one (its detail, stable code and request id)."""

from __future__ import annotations

import httpx


class MarketError(Exception):
    """The market refused a call, answered something unreadable, or could not be reached.

    ``status`` is the HTTP status (None when no answer came), ``detail`` the market's message
    (it names the field and the rule), ``method`` and ``path`` the call; ``code`` is the problem's
    stable code to branch on (docs/errors.md) and ``request_id`` the id the service logged it
    under (None when the answer had none).
    """

    service = "market"
    """The service the message names (a subclass for another service sets its own)."""

    def __init__(
        self,
        status: int | None,
        detail: str,
        method: str = "",
        path: str = "",
        *,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        where = f"{method} {path}: " if method else ""
        who = self.service
        answer = f"{who} answered {status}" if status is not None else f"{who} unreachable"
        super().__init__(f"{where}{answer}: {detail}")
        self.status = status
        self.detail = detail
        self.method = method
        self.path = path
        self.code = code
        self.request_id = request_id


def problem_ids(response: httpx.Response) -> dict[str, str | None]:
    """The problem's ``code`` and the answer's request id (``X-Request-ID``), where given."""
    try:
        body = response.json()
    except ValueError:
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    rid = response.headers.get("x-request-id")
    return {"code": code if isinstance(code, str) else None, "request_id": rid}


class ModelIntegrityError(MarketError):
    """A downloaded model's SHA-256 differs from the digest the market published for it."""


def problem_detail(response: httpx.Response) -> str:
    """The market's ``detail``; a validation error list becomes ``field: message; …``."""
    try:
        body = response.json()
    except ValueError:
        return response.text or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):
        parts = []
        for err in detail:
            if isinstance(err, dict):
                loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
                parts.append(f"{loc}: {err.get('msg', err)}" if loc else str(err.get("msg", err)))
            else:
                parts.append(str(err))
        return "; ".join(parts)
    return str(detail)
