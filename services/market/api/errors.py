"""The market's refusals (domain errors) as HTTP answers: one status per kind, the detail as is.

A :class:`~services.market.errors.Refusal` raised by a route or by the domain code it calls (or
returned by the purchase batcher and raised to its caller) becomes the problem details of
:mod:`mots.platform.problems` (``detail``: ``"<field>: <message>"``) with the kind's status,
exactly what an ``HTTPException`` with that status and detail would answer.
"""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request, status
from starlette.responses import Response

from mots.platform.problems import problem_response
from services.market.errors import (
    Conflict,
    Forbidden,
    NotFound,
    OutOfRange,
    PaymentRequired,
    Refusal,
    Unauthorized,
    Unavailable,
)

STATUS: dict[type[Refusal], int] = {
    NotFound: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    OutOfRange: status.HTTP_422_UNPROCESSABLE_CONTENT,
    PaymentRequired: status.HTTP_402_PAYMENT_REQUIRED,
    Unauthorized: status.HTTP_401_UNAUTHORIZED,
    Forbidden: status.HTTP_403_FORBIDDEN,
    Unavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
}
"""The HTTP status of each kind of refusal."""


def status_of(refusal: Refusal) -> int:
    """The HTTP status answering ``refusal`` (its nearest kind's)."""
    for kind in type(refusal).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    raise TypeError(f"no HTTP status for {type(refusal).__name__}")


def as_http(refusal: Refusal) -> HTTPException:
    """The HTTPException answering ``refusal`` (a 401 also asks for a bearer token)."""
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(refusal, Unauthorized) else None
    return HTTPException(status_of(refusal), refusal.detail, headers=headers)


async def _answer(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refusal)
    http = as_http(exc)
    return problem_response(http.status_code, exc.detail, headers=http.headers, code=exc.code)


def install_refusal_handler(app: FastAPI) -> None:
    """Answer every :class:`Refusal` that reaches ``app`` as :func:`as_http` says."""
    app.add_exception_handler(Refusal, _answer)
