"""The stable problem types of every API: one code each, its URI and its status.

Every refusal's body carries ``type`` (``urn:mots:problem:<code>``) and ``code`` (``<code>``), which
a program may branch on; both stay the same across releases (a new kind of refusal gets a new code,
an old code is never reused with another meaning). ``docs/errors.md`` documents each, and a test
checks the page against :data:`PROBLEM_TYPES` both ways.

A refusal that names no code gets its status's general one (:data:`BY_STATUS`); the refusals a
program most needs to tell apart have their own (the token's and the client's state).
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import HTTPException

TYPE_PREFIX = "urn:mots:problem:"
"""Each problem type URI is this prefix and the code (RFC 9457 §3.1.1: a URI, here a URN)."""


@dataclass(frozen=True, slots=True)
class ProblemType:
    """One kind of refusal: its stable code, its HTTP status and when it is answered."""

    code: str
    status: int
    meaning: str

    @property
    def uri(self) -> str:
        """The problem ``type`` URI."""
        return f"{TYPE_PREFIX}{self.code}"


_TYPES = [
    ProblemType("bad-request", 400, "the request is malformed in a way no field names"),
    ProblemType("unauthenticated", 401, "no bearer token, or one no service knows"),
    ProblemType("token-invalid", 401, "the token is not a platform token, or its signature fails"),
    ProblemType("token-expired", 401, "the token's expiry has passed; renew before it does"),
    ProblemType("token-rotated", 401, "the token was replaced by a newer one; use that one"),
    ProblemType("token-revoked", 401, "the token was revoked (the client remains registered)"),
    ProblemType("enrolment-code-invalid", 401, "the enrolment code is unknown or used up"),
    ProblemType("insufficient-funds", 402, "the wallet's balance is below the price"),
    ProblemType("forbidden", 403, "the token is valid but has no right to this call"),
    ProblemType("operator-only", 403, "a client's token on a route only the operator may call"),
    ProblemType("client-pending", 403, "the client awaits the operator's approval"),
    ProblemType("client-revoked", 403, "the operator revoked the client"),
    ProblemType("client-departed", 403, "the client has left the market"),
    ProblemType("not-found", 404, "the named resource does not exist"),
    ProblemType("method-not-allowed", 405, "the route does not take this HTTP method"),
    ProblemType("conflict", 409, "the resource's state does not allow this now"),
    ProblemType("gone", 410, "the resource existed but is no longer available"),
    ProblemType("body-too-large", 413, "the request body is larger than 1 MiB"),
    ProblemType("invalid-input", 422, "a field or parameter broke a rule; errors lists each"),
    ProblemType("rate-limited", 429, "too many requests; retry after Retry-After seconds"),
    ProblemType("internal-error", 500, "the service failed; the request may be retried"),
    ProblemType("unavailable", 503, "a dependency is briefly unavailable; retry"),
]

PROBLEM_TYPES: dict[str, ProblemType] = {t.code: t for t in _TYPES}
"""Every problem type, by code."""

BY_STATUS: dict[int, str] = {
    400: "bad-request",
    401: "unauthenticated",
    402: "insufficient-funds",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    410: "gone",
    413: "body-too-large",
    422: "invalid-input",
    429: "rate-limited",
    500: "internal-error",
    503: "unavailable",
}
"""The general code of each status, for a refusal that names none."""


def code_for(status: int, code: str | None = None) -> ProblemType:
    """The problem type of a refusal: its own code where it names one, else its status's."""
    if code is not None and code in PROBLEM_TYPES:
        return PROBLEM_TYPES[code]
    general = BY_STATUS.get(status)
    if general is not None:
        return PROBLEM_TYPES[general]
    return ProblemType("bad-request" if status < 500 else "internal-error", status, "")


class ProblemError(HTTPException):
    """An ``HTTPException`` that names its problem code (one of :data:`PROBLEM_TYPES`)."""

    def __init__(self, code: str, detail: str, *, headers: dict[str, str] | None = None) -> None:
        if code not in PROBLEM_TYPES:
            raise ValueError(f"unknown problem code {code!r}")
        super().__init__(PROBLEM_TYPES[code].status, detail, headers=headers)
        self.code = code
