"""A participant registers its device's SuperNode key through its own token; the orchestration
reads the keys of a round's participants (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from mots.tasks.task_file import SHIPPED_DIR
from mots.training.pki import fingerprint, make_node_key
from services.market import node_keys
from tests.services.market.conftest import OPERATOR, node_key_body


def test_a_client_registers_its_own_node_key(
    market: TestClient, register: Any, tmp_path: Path
) -> None:
    """PUT /v1/me/node-key stores the key (PEM or OpenSSH) under the token's client, replaces
    an earlier one, is shown by GET /v1/me and read back by the orchestration's lookup."""
    a, b = register(name="a"), register(name="b")
    key = make_node_key(tmp_path / "a.key")
    body = node_key_body(market, a["auth"], key.private_key, key.public_key.read_text())
    r = market.put("/v1/me/node-key", json=body, headers=a["auth"])
    assert r.status_code == 200, r.text
    assert r.json() == {"client_id": a["id"], "node_key_sha256": key.fingerprint}
    assert market.get("/v1/me", headers=a["auth"]).json()["node_key_sha256"] == key.fingerprint
    body = node_key_body(market, a["auth"], key.private_key, key.public_pem.decode())
    again = market.put("/v1/me/node-key", json=body, headers=a["auth"])
    assert again.status_code == 200  # the same key in PEM: idempotent
    newer = make_node_key(tmp_path / "a2.key")
    body = node_key_body(market, a["auth"], newer.private_key, newer.public_pem.decode())
    assert market.put("/v1/me/node-key", json=body, headers=a["auth"]).status_code == 200
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
    pair = make_node_key(tmp_path / "k.key")
    key = pair.public_pem.decode()
    body = node_key_body(market, a["auth"], pair.private_key, key)
    assert market.put("/v1/me/node-key", json=body).status_code == 401
    for bad in ("not a key", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", ""):
        r = market.put("/v1/me/node-key", json={**body, "public_key": bad}, headers=a["auth"])
        assert r.status_code == 422 and "public_key" in r.text, (bad, r.text)
    assert market.put("/v1/me/node-key", json=body, headers=a["auth"]).status_code == 200
    # b holds the same device's key (shared hardware): its proof holds, the key is a's: 409
    proved = node_key_body(market, b["auth"], pair.private_key, key)
    taken = market.put("/v1/me/node-key", json=proved, headers=b["auth"])
    assert taken.status_code == 409 and "public_key" in taken.json()["detail"]


def test_a_key_needs_proof_of_possession(market: TestClient, register: Any, tmp_path: Path) -> None:
    """A client cannot register a device's public key it does not hold (issue 24): no proof, the
    owner's proof replayed, a signature by another key, another client's or a forged challenge:
    422 naming the rule; the owner registers it after (not 409)."""
    owner, squatter = register(name="owner"), register(name="squatter")
    victim, own = make_node_key(tmp_path / "v.key"), make_node_key(tmp_path / "o.key")
    public = victim.public_pem.decode()
    owners = node_key_body(market, owner["auth"], victim.private_key, public)
    by_own_key = node_key_body(market, squatter["auth"], own.private_key, public)
    forged = {**by_own_key, "challenge": by_own_key["challenge"][:-4] + "AAAA"}
    for body, rule in [
        ({"public_key": public}, "challenge"),
        (owners, "challenge: issued to another client"),
        (by_own_key, "signature: not this key's signature"),
        (forged, "challenge: not one the market issued"),
    ]:
        r = market.put("/v1/me/node-key", json=body, headers=squatter["auth"])
        assert r.status_code == 422 and rule in r.text, (rule, r.text)
    assert market.put("/v1/me/node-key", json=owners, headers=owner["auth"]).status_code == 200


def test_one_device_registers_its_key_as_its_client_of_each_task(
    market: TestClient, tmp_path: Path
) -> None:
    """A device in two tasks is one client in each (a code per task) on its one SuperNode: both
    clients register the same key (each proving possession) and the orchestration's lookup hands
    each task's client that key; a second client of the same task is still refused (409)."""
    content = (SHIPPED_DIR / "digits.yaml").read_text(encoding="utf-8")
    assert market.post("/v1/tasks", json={"content": content}, headers=OPERATOR).status_code == 201

    def client(name: str, task: str) -> dict[str, Any]:
        body = {"type_name": "type-1", "data_size": 50, "cost": "0.5", "task": task}
        code = market.post("/v1/enrolments", json=body, headers=OPERATOR).json()["code"]
        r = market.post("/v1/clients", json={"name": name, "enrolment_code": code})
        assert r.status_code == 201, r.text
        return {"id": r.json()["id"], "auth": {"Authorization": f"Bearer {r.json()['token']}"}}

    fashion, digits = client("pi-01", "fashion-mnist"), client("pi-01", "digits")
    other = client("pi-02", "digits")
    pair = make_node_key(tmp_path / "pi-01.key")
    key = pair.public_pem.decode()
    for c in (fashion, digits):
        body = node_key_body(market, c["auth"], pair.private_key, key)
        r = market.put("/v1/me/node-key", json=body, headers=c["auth"])
        assert r.status_code == 200, r.text
        assert r.json() == {"client_id": c["id"], "node_key_sha256": pair.fingerprint}
    body = node_key_body(market, other["auth"], pair.private_key, key)
    taken = market.put("/v1/me/node-key", json=body, headers=other["auth"])
    assert taken.status_code == 409 and "of this task" in taken.json()["detail"]
    factory = market.app.state.sessions  # type: ignore[attr-defined]
    with factory() as session:
        found = node_keys.keys_of(session, [fashion["id"], digits["id"], other["id"]])
    assert sorted(found.keys) == sorted([fashion["id"], digits["id"]])
    assert {fingerprint(k.encode()) for k in found.keys.values()} == {pair.fingerprint}
