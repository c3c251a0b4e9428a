"""Attacks on who the market pays and who may act (issue 13, part A), in the money suite's
registry (:data:`benchmarks.integrity.money.ATTACKS`), run on its fresh platform.

- ``anonymous_registration``: registering without an enrolment code or the operator's token
  (the issue's attack: an anonymous client declared C_i = 10^9), also with a made-up code, a
  malformed token and a forged or expired signed token; refused when 401 and nobody registered.
- ``greedy_declaration``: a device holding a genuine code for type-1 (D = 50, C = 0.5) claims a
  higher cost, another type or a larger data size; refused when 409 and no client of the
  market has a cost or data size its type was not attested with.
- ``huge_data_size``: D_i = 10^7 anonymously, on top of a code, and beyond the schema's bound
  with the operator's token; refused when 401/409/422.
- ``type_flood``: 40 anonymous registrations of distinct types, then enrolments of new types
  until one beyond ``MOTS_MAX_TYPES``: refused when 401, and 409 beyond the bound; the market's
  active population never exceeds it (the flood's enrolments are revoked afterwards).
- ``cross_client``: an honest client's token on another client's resources and on operator
  routes (403), a token signed with a guessed key for another client id (401), and reads that
  must answer with the caller's own record; contained when every answer is so.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import httpx

from benchmarks.integrity.money import OPERATOR, Attack, MoneyPlatform, attack
from mots.local.keys import process_secrets
from mots.platform import tokens

GREEDY = {"name": "greedy", "type_name": "type-1", "data_size": 50, "cost": "1000000000"}
MAX_TYPES = 32
"""``MOTS_MAX_TYPES`` of the suite's platform (the market's default)."""


def _clients(market: httpx.Client) -> list[dict[str, Any]]:
    """Every registered client (as the operator), following the pages."""
    out: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 500}
    while True:
        page = market.get("/v1/clients", params=params, headers=OPERATOR).raise_for_status().json()
        out.extend(page["items"])
        if not page.get("next"):
            return out
        params["cursor"] = page["next"]


def _enrol(market: httpx.Client, **body: Any) -> httpx.Response:
    return market.post("/v1/enrolments", json=body, headers=OPERATOR)


def _revoke_enrolment(market: httpx.Client, enrolment_id: int) -> None:
    market.delete(f"/v1/enrolments/{enrolment_id}", headers=OPERATOR).raise_for_status()


@attack("anonymous_registration")
def anonymous_registration(p: MoneyPlatform) -> Attack:
    """Registering without an operator's attestation: 401 every time, nobody registered."""
    out = Attack()
    before = len(_clients(p.market))
    now = int(time.time())
    tries: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        ("no token, greedy cost", GREEDY, {}),
        ("no token, honest facts", {**GREEDY, "cost": "0.5"}, {}),
        ("made-up code", {**GREEDY, "enrolment_code": "enrol_" + "A" * 43}, {}),
        ("malformed token", GREEDY, {"Authorization": "Bearer mots_not-a-token"}),
        (
            "forged token",
            GREEDY,
            {"Authorization": f"Bearer {tokens.sign(1, now + 600, 'guessed-key')}"},
        ),
        (
            "expired token",
            GREEDY,
            {"Authorization": f"Bearer {tokens.sign(1, now - 1, process_secrets().token_secret)}"},
        ),
    ]
    for what, body, headers in tries:
        r = p.market.post("/v1/clients", json=body, headers=headers)
        out.record(r.status_code == 401, f"{what}: {r.status_code} {r.text[:120]}")
    after = len(_clients(p.market))
    out.record(after == before, f"{after - before} clients registered anonymously")
    return out


def _attested_facts_hold(market: httpx.Client) -> bool:
    """Every client's (D_i, C_i) is its type's one attested pair, none the greedy figures."""
    by_type: dict[str, set[tuple[int, Decimal]]] = {}
    for c in _clients(market):
        by_type.setdefault(c["type_name"], set()).add((c["data_size"], Decimal(c["cost"])))
    return all(len(facts) == 1 for facts in by_type.values()) and not any(
        d >= 10**6 or cost >= 10**6 for facts in by_type.values() for d, cost in facts
    )


@attack("greedy_declaration")
def greedy_declaration(p: MoneyPlatform) -> Attack:
    """A genuine code with a greedy claim on top: 409, and no client holds unattested facts."""
    out = Attack()
    issued = _enrol(p.market, type_name="type-1", data_size=50, cost="0.5", uses=5, ttl_s=600)
    issued.raise_for_status()
    code = issued.json()["code"]
    claims: list[dict[str, Any]] = [
        {"cost": "1000000000"},
        {"cost": "0.500001"},
        {"type_name": "type-3"},
        {"type_name": "type-greedy", "cost": "999"},
        {"data_size": 60},
    ]
    for claim in claims:
        r = p.market.post("/v1/clients", json={"name": "greedy", "enrolment_code": code, **claim})
        out.record(r.status_code == 409, f"{claim}: {r.status_code} {r.text[:120]}")
    _revoke_enrolment(p.market, issued.json()["id"])
    out.record(
        _attested_facts_hold(p.market), "a client holds facts its type was not attested with"
    )
    return out


@attack("huge_data_size")
def huge_data_size(p: MoneyPlatform) -> Attack:
    """D_i = 10^7 anonymously or on a code (401, 409); beyond the schema's bound even for the
    operator (422)."""
    out = Attack()
    huge = {"name": "huge", "type_name": "type-huge", "data_size": 10_000_000, "cost": "0"}
    r = p.market.post("/v1/clients", json=huge)
    out.record(r.status_code == 401, f"anonymous: {r.status_code}")
    issued = _enrol(p.market, type_name="type-1", data_size=50, cost="0.5", uses=1, ttl_s=600)
    issued.raise_for_status()
    r = p.market.post(
        "/v1/clients",
        json={"name": "huge", "enrolment_code": issued.json()["code"], "data_size": 10_000_000},
    )
    out.record(r.status_code == 409, f"on a code: {r.status_code}")
    _revoke_enrolment(p.market, issued.json()["id"])
    r = p.market.post("/v1/clients", json={**huge, "data_size": 10**9}, headers=OPERATOR)
    out.record(r.status_code == 422, f"beyond the schema: {r.status_code}")
    out.record(_attested_facts_hold(p.market), "a client holds a huge data size")
    return out


@attack("type_flood")
def type_flood(p: MoneyPlatform) -> Attack:
    """40 anonymous types (401 each); new types enrolled up to MOTS_MAX_TYPES, then 409."""
    out = Attack()
    for i in range(40):
        body = {"name": f"flood-{i}", "type_name": f"flood-{i}", "data_size": 10 + i, "cost": "0"}
        r = p.market.post("/v1/clients", json=body)
        out.record(r.status_code == 401, f"anonymous type {i}: {r.status_code}")
    known = {c["type_name"] for c in _clients(p.market) if c["status"] == "active"}
    enrolled: list[int] = []
    for i in range(MAX_TYPES + 3):
        r = _enrol(p.market, type_name=f"op-{i}", data_size=1000 + i, cost="1", uses=1, ttl_s=600)
        if r.status_code == 201:
            enrolled.append(r.json()["id"])
            continue
        out.record(
            r.status_code == 409 and "MOTS_MAX_TYPES" in r.text, f"type {i}: {r.status_code}"
        )
    out.record(len(known) + len(enrolled) <= MAX_TYPES, f"{len(enrolled)} types enrolled")
    for e in enrolled:
        _revoke_enrolment(p.market, e)
    return out


@attack("cross_client")
def cross_client(p: MoneyPlatform) -> Attack:
    """A client's token on another's resources and on operator routes: 403; a guessed-key token
    for another id: 401; its own reads answer with its own record."""
    out = Attack()
    a, b = p.honest[0], p.honest[1]
    forged = tokens.sign(b.id, int(time.time()) + 600, "guessed-key")
    as_b = {"Authorization": f"Bearer {forged}"}
    tries: list[tuple[str, str, dict[str, Any], dict[str, str], int]] = [
        ("POST", f"/v1/clients/{b.id}/token", {}, a.auth, 403),
        ("DELETE", f"/v1/clients/{b.id}/token", {}, a.auth, 403),
        ("DELETE", f"/v1/clients/{b.id}", {}, a.auth, 403),
        ("POST", f"/v1/clients/{b.id}/approve", {}, a.auth, 403),
        ("GET", "/v1/clients", {}, a.auth, 403),
        ("GET", "/v1/enrolments", {}, a.auth, 403),
        (
            "POST",
            "/v1/deposits",
            {"json": {"client_id": a.id, "amount": "1000"}},
            {**a.auth, "Idempotency-Key": "cross-client-deposit"},
            403,
        ),
        ("GET", "/v1/ledger/check", {}, a.auth, 403),
        ("GET", "/v1/me", {}, as_b, 401),
        ("GET", "/v1/me/balance", {}, as_b, 401),
    ]
    for method, path, kw, headers, expected in tries:
        r = p.market.request(method, path, headers=headers, **kw)
        out.record(r.status_code == expected, f"{method} {path}: {r.status_code}")
    for service, method, path in (
        ("orchestration", "POST", "/v1/rounds"),
        ("pricing", "GET", "/v1/mechanisms"),
    ):
        r = p.api(service).request(method, path, headers=as_b)
        out.record(r.status_code == 401, f"{service} {path} as B (forged): {r.status_code}")
    r = p.orchestration.post("/v1/rounds", headers=a.auth)
    out.record(r.status_code == 403, f"orchestration POST /v1/rounds as a client: {r.status_code}")
    me = p.market.get("/v1/me", headers=a.auth).json()
    balance = p.market.get("/v1/me/balance", headers=a.auth).json()
    out.record(me.get("id") == a.id and balance.get("client_id") == a.id, "own reads not own")
    return out
