"""Attacks on the types the market pays for (issue 13), against the real market app on SQLite and
PostgreSQL: anonymous and greedy registration, huge data sizes, type floods, pending clients.

A client's type (D_i, C_i) is the operator's: an enrolment code carries it, or the operator's
token registers the client; self-registration exists only when the operator turns it on, and
then it is bounded, rate-limited and pending until approved.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import update

from mots.platform.db import in_transaction
from services.market.models import Enrolment
from tests.services.market.conftest import OPERATOR, priced_population

GREEDY = {"name": "greedy", "type_name": "small", "data_size": 50, "cost": "1000000000"}


def _enrol(market: TestClient, **body: Any) -> dict[str, Any]:
    body = {"type_name": "small", "data_size": 50, "cost": "0.5", **body}
    r = market.post("/v1/enrolments", json=body, headers=OPERATOR)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def _population(market: TestClient) -> dict[str, list[int]]:
    return priced_population(market)


def _auth(client: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {client['token']}"}


def test_anonymous_registration_is_refused(market: TestClient) -> None:
    """Without a code or the operator's token, registering is a 401 naming enrolment_code (the
    issue's attack: an anonymous client declared C_i = 10^9 and was paid it)."""
    r = market.post("/v1/clients", json=GREEDY)
    assert r.status_code == 401
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["detail"].startswith("enrolment_code:")
    assert r.headers["WWW-Authenticate"] == "Bearer"
    bogus = {"Authorization": "Bearer mots_not-a-token"}
    assert market.post("/v1/clients", json=GREEDY, headers=bogus).status_code == 401
    assert market.get("/v1/clients", headers=OPERATOR).json()["items"] == []
    assert _population(market) == {}


def test_a_client_gets_the_attested_type_not_the_claimed_one(market: TestClient) -> None:
    """The code's (D_i, C_i) is the client's; a greedy claim on top of it is a 409, nothing is
    registered, and the code's use is not spent."""
    enrolment = _enrol(market, uses=1)
    code = enrolment["code"]
    assert "code" not in market.get("/v1/enrolments", headers=OPERATOR).json()["items"][0]
    for claim in ({"cost": "1000000000"}, {"data_size": 10_000_000}, {"type_name": "large"}):
        r = market.post("/v1/clients", json={"name": "g", "enrolment_code": code, **claim})
        assert r.status_code == 409, r.text
        assert r.json()["detail"].startswith(next(iter(claim)) + ":")
    r = market.post("/v1/clients", json={"name": "pi", "enrolment_code": code, "cost": "0.5"})
    assert r.status_code == 201, r.text
    me = r.json()
    assert (me["type_name"], me["data_size"], Decimal(me["cost"]), me["status"]) == (
        "small",
        50,
        Decimal("0.5"),
        "active",
    )
    assert _population(market) == {"small": [me["id"]]}


def test_enrolment_codes_are_used_up_expire_and_are_revoked(market: TestClient) -> None:
    """A code admits its number of uses, not one more; an expired or revoked one admits none."""
    once = _enrol(market, uses=1)["code"]
    assert market.post("/v1/clients", json={"name": "a", "enrolment_code": once}).status_code == 201
    again = market.post("/v1/clients", json={"name": "b", "enrolment_code": once})
    assert again.status_code == 401 and again.json()["detail"].startswith("enrolment_code:")

    expired = _enrol(market, uses=5)
    in_transaction(
        market.app.state.sessions,
        lambda s: s.execute(
            update(Enrolment).where(Enrolment.id == expired["id"]).values(expires_at=1)
        ),
    )
    r = market.post("/v1/clients", json={"name": "c", "enrolment_code": expired["code"]})
    assert r.status_code == 401

    revoked = _enrol(market, uses=5)
    r = market.delete(f"/v1/enrolments/{revoked['id']}", headers=OPERATOR)
    assert r.status_code == 200 and r.json()["revoked"] is True
    r = market.post("/v1/clients", json={"name": "d", "enrolment_code": revoked["code"]})
    assert r.status_code == 401
    assert (
        market.post("/v1/clients", json={"name": "e", "enrolment_code": "x" * 20}).status_code
        == 401
    )
    assert len(market.get("/v1/clients", headers=OPERATOR).json()["items"]) == 1


def test_only_the_operator_issues_codes_and_approves(market: TestClient, register) -> None:
    """A client's token cannot issue codes, list them, approve or revoke clients (403)."""
    client = register()
    body = {"type_name": "small", "data_size": 50, "cost": "0.5"}
    for method, path, kw in (
        ("POST", "/v1/enrolments", {"json": body}),
        ("GET", "/v1/enrolments", {}),
        ("POST", f"/v1/clients/{client['id']}/approve", {}),
        ("DELETE", f"/v1/clients/{client['id']}", {}),
    ):
        r = market.request(method, path, headers=client["auth"], **kw)
        assert r.status_code == 403, (path, r.status_code)
    assert market.get("/v1/enrolments", headers=OPERATOR).json() == {"items": [], "next": None}


def test_type_flood_is_refused_beyond_max_types(make_market: Callable[..., Any]) -> None:
    """One type beyond MOTS_MAX_TYPES is a clear 409, by code or by the operator; the population
    pricing sees never has more types (so rounds keep opening)."""
    with make_market(max_types=3) as market:
        for i in range(3):
            _enrol(market, type_name=f"t{i}", data_size=10 + i)
        r = market.post(
            "/v1/enrolments",
            json={"type_name": "t3", "data_size": 13, "cost": "0.5"},
            headers=OPERATOR,
        )
        assert r.status_code == 409 and "MOTS_MAX_TYPES" in r.json()["detail"]
        r = market.post(
            "/v1/clients",
            json={"name": "x", "type_name": "t9", "data_size": 5, "cost": "0.1"},
            headers=OPERATOR,
        )
        assert r.status_code == 409 and r.json()["detail"].startswith("type_name:")
        same = market.post(
            "/v1/clients",
            json={"name": "y", "type_name": "t0", "data_size": 10, "cost": "0.5"},
            headers=OPERATOR,
        )
        assert same.status_code == 201
        assert len(_population(market)) <= 3


def test_open_registration_is_pending_bounded_and_rate_limited(
    make_market: Callable[..., Any],
) -> None:
    """With MOTS_OPEN_REGISTRATION a client may self-register, but only within the operator's
    bounds (a huge D_i or a greedy C_i is a 422), at most N a minute per address (429 with
    Retry-After), and as pending: not priced, unable to declare or buy, until approved."""
    with make_market(
        open_registration=True,
        open_registration_max_cost="2",
        open_registration_max_data_size=1000,
        open_registration_per_minute=3,
    ) as market:
        r = market.post("/v1/clients", json=GREEDY)
        assert r.status_code == 422 and r.json()["detail"].startswith("cost:")
        huge = {**GREEDY, "cost": "1", "data_size": 10_000_000}
        r = market.post("/v1/clients", json=huge)
        assert r.status_code == 422 and r.json()["detail"].startswith("data_size:")
        body = {"name": "self", "type_name": "small", "data_size": 50, "cost": "0.5"}
        first = market.post("/v1/clients", json=body)
        assert first.status_code == 201 and first.json()["status"] == "pending"
        pending = first.json()
        assert _population(market) == {}
        assert market.get("/v1/me", headers=_auth(pending)).json()["status"] == "pending"
        r = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=_auth(pending))
        assert r.status_code == 403 and r.json()["code"] == "client-pending", r.text
        buy = market.post(
            "/v1/purchases",
            json={"round_id": 1},
            headers={**_auth(pending), "Idempotency-Key": "pending-buys-1"},
        )
        assert buy.status_code in (401, 403), buy.text  # 403 once this process knows the token
        assert market.post("/v1/clients", json=body).status_code == 201
        assert market.post("/v1/clients", json=body).status_code == 201
        limited = market.post("/v1/clients", json=body)
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
        r = market.post(f"/v1/clients/{pending['id']}/approve", headers=OPERATOR)
        assert r.status_code == 200 and r.json()["status"] == "active"
        assert _population(market) == {"small": [pending["id"]]}
        assert (
            market.post(f"/v1/clients/{pending['id']}/approve", headers=OPERATOR).status_code == 409
        )


def test_a_revoked_client_loses_its_token_and_its_place(market: TestClient, register) -> None:
    """Revoking a client: its token is refused at once (403 client-revoked, as docs/errors.md
    says: the credential is known, its client may no longer act) and pricing no longer sees it."""
    a, b = register(name="a"), register(name="b")
    assert market.get("/v1/me", headers=a["auth"]).status_code == 200
    r = market.delete(f"/v1/clients/{a['id']}", headers=OPERATOR)
    assert r.status_code == 200 and r.json()["status"] == "revoked"
    r = market.get("/v1/me", headers=a["auth"])
    assert r.status_code == 403 and r.json()["code"] == "client-revoked", r.text
    assert _population(market) == {"small": [b["id"]]}
    assert market.delete(f"/v1/clients/{a['id']}", headers=OPERATOR).status_code == 409
    assert market.delete("/v1/clients/999999", headers=OPERATOR).status_code == 404


def test_failed_enrolment_codes_are_throttled_per_address(market: TestClient) -> None:
    """Made-up codes: 401 each, then after 10 failures in a minute 429 with Retry-After, the
    attempt unchecked: a genuine code from that address waits too (codes cannot be guessed)."""
    from services.market.rate_limits import CODE_FAILURES_PER_MINUTE

    code = _enrol(market, type_name="t", data_size=50, cost="1", uses=1)["code"]
    statuses = [
        market.post("/v1/clients", json={"name": "g", "enrolment_code": f"enrol_{i:043d}"})
        for i in range(CODE_FAILURES_PER_MINUTE + 2)
    ]
    assert [r.status_code for r in statuses[:CODE_FAILURES_PER_MINUTE]] == [401] * 10
    throttled = statuses[CODE_FAILURES_PER_MINUTE:]
    assert all(r.status_code == 429 and int(r.headers["Retry-After"]) >= 1 for r in throttled)
    r = market.post("/v1/clients", json={"name": "late", "enrolment_code": code})
    assert r.status_code == 429 and "enrolment_code" in r.json()["detail"]


def test_a_used_up_code_is_no_guess(market: TestClient) -> None:
    """Devices that outnumber their code's uses get 401 each, never the guessers' 429: a real
    code run dry is not guessing (the two-API-processes test registers 60 such devices)."""
    from services.market.rate_limits import CODE_FAILURES_PER_MINUTE

    code = _enrol(market, type_name="t", data_size=50, cost="1", uses=1)["code"]
    assert market.post("/v1/clients", json={"name": "a", "enrolment_code": code}).status_code == 201
    late = [
        market.post("/v1/clients", json={"name": f"late-{i}", "enrolment_code": code})
        for i in range(2 * CODE_FAILURES_PER_MINUTE)
    ]
    assert [r.status_code for r in late] == [401] * (2 * CODE_FAILURES_PER_MINUTE)
    r = market.post("/v1/clients", json={"name": "g", "enrolment_code": "enrol_" + "0" * 43})
    assert r.status_code == 401  # the address's first guess is still checked
