"""Client tokens against the real market (SQLite and PostgreSQL): expiry, rotation, revocation by
the client and by the operator, and no client acting as another (issue 13)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient

from mots.platform import tokens
from mots.platform.settings import DEV_TOKEN_SECRET
from tests.services.market.conftest import OPERATOR


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_token_states_its_client_and_expiry_and_expires(market: TestClient, register) -> None:
    """The registration's token is signed for its client and expires at token_expires_at; a
    token past its expiry is a 401 that says so, even with the right client's id."""
    a = register()
    claim = tokens.parse(a["token"])
    assert claim is not None and claim.client_id == a["id"]
    assert a["token_expires_at"].endswith("Z")
    expires = datetime.fromisoformat(a["token_expires_at"]).timestamp()
    assert claim.expires_at == expires > time.time()
    expired = tokens.sign(a["id"], int(time.time()) - 1, DEV_TOKEN_SECRET)
    r = market.get("/v1/me", headers=_auth(expired))
    assert r.status_code == 401 and "expired" in r.json()["detail"]
    forged = tokens.sign(a["id"], int(time.time()) + 600, "not-the-secret")
    assert market.get("/v1/me", headers=_auth(forged)).status_code == 401


def test_a_valid_signature_is_not_enough(market: TestClient, register) -> None:
    """A correctly signed token the market never issued (say, a leaked secret's) is refused: the
    market admits only a client's current token."""
    a = register()
    minted = tokens.sign(a["id"], int(time.time()) + 600, DEV_TOKEN_SECRET)
    assert market.get("/v1/me", headers=_auth(minted)).status_code == 401


def test_rotation_gives_a_new_token_and_revokes_the_old(market: TestClient, register) -> None:
    """POST /v1/me/token: the new token works, the old one is refused at once; rotating again
    with the old token is a 401 (two devices racing with one token: one wins)."""
    a = register()
    r = market.post("/v1/me/token", headers=a["auth"])
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["client_id"] == a["id"] and new["token"] != a["token"]
    assert market.get("/v1/me", headers=_auth(new["token"])).json()["id"] == a["id"]
    assert market.get("/v1/me", headers=a["auth"]).status_code == 401
    assert market.post("/v1/me/token", headers=a["auth"]).status_code == 401


def test_self_and_operator_revocation(market: TestClient, register) -> None:
    """A client revokes its own token (204; then 401); the operator issues it a new one, and can
    revoke that too; the client stays registered and priced throughout."""
    a = register()
    assert market.delete("/v1/me/token", headers=a["auth"]).status_code == 204
    assert market.get("/v1/me", headers=a["auth"]).status_code == 401
    r = market.post(f"/v1/clients/{a['id']}/token", headers=OPERATOR)
    assert r.status_code == 200
    token = r.json()["token"]
    assert market.get("/v1/me", headers=_auth(token)).status_code == 200
    assert market.delete(f"/v1/clients/{a['id']}/token", headers=OPERATOR).status_code == 204
    assert market.get("/v1/me", headers=_auth(token)).status_code == 401
    listed = market.get("/v1/clients", headers=OPERATOR).json()["items"]
    assert [(c["id"], c["status"]) for c in listed] == [(a["id"], "active")]


def test_no_client_acts_as_another(market: TestClient, register, fund, open_round) -> None:
    """A's token on B's resources: B's token routes are the operator's (403), its decision and
    balance are A's own, and A cannot rotate or revoke B's token."""
    a, b = register(name="a"), register(name="b")
    fund(b["id"], "5")
    open_round(rewards={"small": "1.0"})  # a payout: A joins with an empty wallet
    attempts: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", f"/v1/clients/{b['id']}/token", {}),
        ("DELETE", f"/v1/clients/{b['id']}/token", {}),
        ("DELETE", f"/v1/clients/{b['id']}", {}),
        ("POST", f"/v1/clients/{b['id']}/approve", {}),
        ("GET", "/v1/clients", {}),
    ]
    for method, path, kw in attempts:
        assert market.request(method, path, headers=a["auth"], **kw).status_code == 403, path
    assert market.get("/v1/me/balance", headers=a["auth"]).json()["client_id"] == a["id"]
    r = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=a["auth"])
    assert r.status_code == 200 and r.json()["client_id"] == a["id"]
    assert market.get("/v1/me", headers=b["auth"]).json()["id"] == b["id"]
    assert market.get("/v1/rounds/1/decision", headers=b["auth"]).status_code == 404


def _refused(r: Any) -> tuple[int, str]:
    body = r.json()
    assert body["type"] == f"urn:mots:problem:{body['code']}", body
    assert body["request_id"] == r.headers["x-request-id"], body
    return r.status_code, body["code"]


def test_expired_rotated_revoked_tokens_and_revoked_clients_are_told_apart(
    market: TestClient, register
) -> None:
    """Each dead credential gets its own documented refusal (docs/errors.md), on the market at
    once: expired 401 token-expired, forged 401 token-invalid, rotated 401 token-rotated,
    revoked 401 token-revoked, the client revoked 403 client-revoked, a client's token on an
    operator route 403 operator-only (a pending client's 403 client-pending: test_attested_types)."""
    a, b, c = register("a"), register("b"), register("c")
    expired = tokens.sign(a["id"], int(time.time()) - 1, DEV_TOKEN_SECRET)
    assert _refused(market.get("/v1/me", headers=_auth(expired))) == (401, "token-expired")
    forged = tokens.sign(a["id"], int(time.time()) + 600, "not-the-secret")
    assert _refused(market.get("/v1/me", headers=_auth(forged))) == (401, "token-invalid")
    assert market.post("/v1/me/token", headers=a["auth"]).status_code == 200
    assert _refused(market.get("/v1/me", headers=a["auth"])) == (401, "token-rotated")
    assert market.delete("/v1/me/token", headers=b["auth"]).status_code == 204
    assert _refused(market.get("/v1/me", headers=b["auth"])) == (401, "token-revoked")
    assert market.delete(f"/v1/clients/{c['id']}", headers=OPERATOR).status_code == 200
    assert _refused(market.get("/v1/me", headers=c["auth"])) == (403, "client-revoked")
    d = register("d")
    r = market.get("/v1/clients", headers=d["auth"])
    assert _refused(r) == (403, "operator-only")


def test_a_request_id_is_answered_and_logged(market: TestClient, caplog: Any) -> None:
    """Every answer carries X-Request-ID (the caller's own if it sent a well-formed one); a
    refusal's body repeats it, and the service's log line names it."""
    ok = market.get("/healthz")
    assert len(ok.headers["x-request-id"]) == 32
    with caplog.at_level("INFO", logger="mots.requests"):
        r = market.get("/v1/me", headers={"X-Request-ID": "trace-42.a_b"})
    assert r.headers["x-request-id"] == "trace-42.a_b" == r.json()["request_id"]
    assert any("request_id=trace-42.a_b" in m and "401" in m for m in caplog.messages)
    r = market.get("/v1/me", headers={"X-Request-ID": "bad id;" + "x" * 70})
    assert len(r.json()["request_id"]) == 32  # not well-formed: the service makes its own
