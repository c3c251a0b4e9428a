"""A participant registers its device's SuperNode key through its own token; the orchestration
reads the keys of a round's participants (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from mots.training.pki import fingerprint, make_node_key
from services.market import node_keys


def test_a_client_registers_its_own_node_key(
    market: TestClient, register: Any, tmp_path: Path
) -> None:
    """PUT /v1/me/node-key stores the key (PEM or OpenSSH) under the token's client, replaces
    an earlier one, is shown by GET /v1/me and read back by the orchestration's lookup."""
    a, b = register(name="a"), register(name="b")
    key = make_node_key(tmp_path / "a.key")
    r = market.put(
        "/v1/me/node-key", json={"public_key": key.public_key.read_text()}, headers=a["auth"]
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"client_id": a["id"], "node_key_sha256": key.fingerprint}
    assert market.get("/v1/me", headers=a["auth"]).json()["node_key_sha256"] == key.fingerprint
    again = market.put(
        "/v1/me/node-key", json={"public_key": key.public_pem.decode()}, headers=a["auth"]
    )
    assert again.status_code == 200  # the same key in PEM: idempotent
    newer = make_node_key(tmp_path / "a2.key")
    market.put("/v1/me/node-key", json={"public_key": newer.public_pem.decode()}, headers=a["auth"])
    factory = market.app.state.sessions  # type: ignore[attr-defined]
    with factory() as session:
        found = node_keys.keys_of(session, [a["id"], b["id"], 999])
    assert list(found.keys) == [a["id"]]
    assert fingerprint(found.keys[a["id"]].encode()) == newer.fingerprint


def test_bad_keys_and_someone_elses_key_are_refused(
    market: TestClient, register: Any, tmp_path: Path
) -> None:
    """No token: 401; not an EC key on a NIST curve: 422 naming public_key; a key another client
    registered: 409."""
    a, b = register(name="a"), register(name="b")
    key = make_node_key(tmp_path / "k.key").public_pem.decode()
    assert market.put("/v1/me/node-key", json={"public_key": key}).status_code == 401
    for bad in ("not a key", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", ""):
        r = market.put("/v1/me/node-key", json={"public_key": bad}, headers=a["auth"])
        assert r.status_code == 422 and "public_key" in r.text, (bad, r.text)
    assert (
        market.put("/v1/me/node-key", json={"public_key": key}, headers=a["auth"]).status_code
        == 200
    )
    taken = market.put("/v1/me/node-key", json={"public_key": key}, headers=b["auth"])
    assert taken.status_code == 409 and "public_key" in taken.json()["detail"]
