"""Domain refusals answer exactly as the HTTPExceptions they replaced (status, headers, bytes), in
the platform's one error shape (RFC 9457 problem+json)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from mots.platform.problem_types import BY_STATUS, code_for
from mots.platform.problems import PROBLEM_JSON, install_problem_handlers
from services.market.api.errors import as_http, install_refusal_handler, status_of
from services.market.errors import (
    BadEnrolmentCode,
    Conflict,
    NotFound,
    PaymentRequired,
    Refusal,
    Unauthorized,
    Unavailable,
)

CASES = [
    (NotFound("round_id", "round 9 does not exist"), 404, None),
    (Conflict("Idempotency-Key", "this key was used with a different request body"), 409, None),
    (PaymentRequired("balance", "0.5 is below the price 1.05"), 402, None),
    (
        Unauthorized("Authorization", "the token is not a registered client's"),
        401,
        {"WWW-Authenticate": "Bearer"},
    ),
    (Unavailable("ledger", "retry with the same Idempotency-Key"), 503, None),
    (
        BadEnrolmentCode("enrolment_code", "unknown, expired, revoked or used up"),
        401,
        {"WWW-Authenticate": "Bearer"},
    ),
]


@pytest.fixture(scope="module")
def client() -> TestClient:
    """An app with the market's refusal handler, raising each refusal or its old HTTPException."""
    app = FastAPI()
    install_problem_handlers(app)
    install_refusal_handler(app)

    @app.get("/refusal/{i}")
    def refusal(i: int) -> None:
        raise CASES[i][0]

    @app.get("/http/{i}")
    def http(i: int) -> None:
        refusal, code, headers = CASES[i]
        raise HTTPException(code, f"{refusal.field}: {refusal.message}", headers=headers)

    return TestClient(app)


@pytest.mark.parametrize("i", range(len(CASES)))
def test_refusal_answers_like_its_http_exception(client: TestClient, i: int) -> None:
    """Same status, same WWW-Authenticate, byte-identical problem body (detail ``field: …``)."""
    refusal, code, headers = CASES[i]
    new = client.get(f"/refusal/{i}")
    old = client.get(f"/http/{i}")
    assert new.status_code == old.status_code == code == status_of(refusal)
    body, before = new.json(), old.json()
    assert body.pop("request_id") != before.pop("request_id")  # each answer its own id
    if refusal.code is not None:  # a refusal with its own code; the HTTPException has none
        assert body.pop("code") == refusal.code and before.pop("code") == BY_STATUS[code]
        body.pop("type"), before.pop("type")
    assert body == before
    assert new.headers["content-type"] == PROBLEM_JSON
    kind = code_for(code, refusal.code)
    assert (body["status"], body["detail"]) == (code, refusal.detail)
    assert body.get("type", kind.uri) == kind.uri
    assert new.headers.get("www-authenticate") == old.headers.get("www-authenticate")
    assert (headers or {}).get("WWW-Authenticate") == new.headers.get("www-authenticate")


def test_a_refusal_names_its_field_and_rule() -> None:
    """``detail`` is ``field: message``; str() says the same; an unmapped kind is a bug."""
    r = Conflict("round_id", "round 3 is closed")
    assert (r.field, r.message, r.detail, str(r)) == (
        "round_id",
        "round 3 is closed",
        "round_id: round 3 is closed",
        "round_id: round 3 is closed",
    )
    assert as_http(r).status_code == 409 and as_http(r).headers is None

    class Teapot(Refusal):
        pass

    with pytest.raises(TypeError, match="Teapot"):
        status_of(Teapot("x", "y"))
