"""SuperNode keys: a client registers the public key of the device it trains on; the orchestration
reads the keys of a round's participants and registers exactly those with the SuperLink.

The key is a client's own declaration, made with its own token and a proof that it holds the
private key (its signature over a short-lived challenge the market issued to this client), so no
client can register another device's public key first; the SuperLink then admits only the device
that holds the matching private key, and the training result names that device's participant.
One key belongs to one client per task: a device that takes part in two tasks is one client in
each (each registered with its task's enrolment code) and trains both on its one SuperNode, so
each of its clients registers the same key, proving possession each time; a round's coalition
is of one task, so the SuperLink's node map never names two clients for one key.

The same key renews the client's token (:data:`RENEWAL`): a device that was away longer than its
token lives asks for a renewal challenge for its client id and signs it with the key it
registered; no token and no new enrolment code is needed, and nobody without that key can.
Challenges carry their purpose, so a registration challenge never renews a token and vice versa.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.api.market import NodeKeyOut
from mots.platform.contracts import NodeKeys
from mots.platform.db import one_of
from mots.platform.node_proof import signed_by
from mots.training.pki import fingerprint, public_pem_from_text
from services.market import ledger
from services.market.errors import Conflict
from services.market.models import Client

_CLIENT_ID = Client.metadata.tables[Client.__tablename__].c.id
CHALLENGE_TTL_S = 300
"""Seconds a node-key challenge may be signed and used."""
REGISTRATION = "nkc"
"""Purpose of a challenge that registers a key (POST /v1/me/node-key/challenge)."""
RENEWAL = "nkr"
"""Purpose of a challenge that renews a token (POST /v1/clients/{id}/token/challenge)."""
_ISSUED_BY = {
    REGISTRATION: "POST /v1/me/node-key/challenge",
    RENEWAL: "POST /v1/clients/{id}/token/challenge",
}


def _mac(secret: str, body: str) -> str:
    digest = hmac.new(secret.encode(), f"node-key-challenge|{body}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def challenge_for(client_id: int, secret: str, purpose: str = REGISTRATION) -> tuple[str, int]:
    """A fresh challenge for ``purpose`` bound to ``client_id`` (stateless: MAC'd under the token
    key, with a distinct domain; the purpose is the first, MAC'd, field) and its expiry."""
    expires_at = int(time.time()) + CHALLENGE_TTL_S
    body = f"{purpose}.{client_id}.{expires_at}.{secrets.token_hex(16)}"
    return f"{body}.{_mac(secret, body)}", expires_at


def proof_problem(
    client_id: int,
    secret: str,
    pem: bytes,
    challenge: str,
    signature: str,
    purpose: str = REGISTRATION,
) -> str | None:
    """Why the proof of possession fails (the field and the rule), or None when ``challenge`` is
    one the market issued ``client_id`` for ``purpose``, unexpired, and ``signature`` is the
    key's over it."""
    body, _, mac = challenge.rpartition(".")
    parts = body.split(".")
    if (
        len(parts) != 4
        or parts[0] != purpose
        or not hmac.compare_digest(mac.encode(), _mac(secret, body).encode())
    ):
        return f"challenge: not one the market issued ({_ISSUED_BY[purpose]})"
    if parts[1] != str(client_id):
        return "challenge: issued to another client"
    if not parts[2].isdigit() or int(parts[2]) <= time.time():
        return "challenge: expired; ask for a new one"
    if not signed_by(pem, challenge, signature):
        return "signature: not this key's signature of the challenge (sign it with the node's key)"
    return None


def normalised(public_key: str) -> bytes:
    """The key as the SuperLink registers it (PEM SubjectPublicKeyInfo); ValueError naming
    ``public_key`` and the rule when it is not an EC key on a NIST curve in PEM or OpenSSH form."""
    return public_pem_from_text(public_key)


def register(session: Session, client: Client, pem: bytes) -> NodeKeyOut:
    """Record ``pem`` as ``client``'s SuperNode key (replacing an earlier one); Conflict when
    another client of the same task registered the same key (the same device's client of
    another task may: one device, one SuperNode, a client per task)."""
    digest = fingerprint(pem)
    owner = session.scalar(
        select(Client.id).where(Client.node_key_sha256 == digest, Client.task == client.task)
    )
    if owner is not None and owner != client.id:
        raise Conflict("public_key", "this key is registered by another client of this task")
    client.node_public_key = pem.decode()
    client.node_key_sha256 = digest
    session.add(client)
    return NodeKeyOut(client_id=client.id, node_key_sha256=digest)


def keys_of(session: Session, client_ids: list[int]) -> NodeKeys:
    """The registered keys of the active ones of ``client_ids`` (clients without one, and revoked
    or departed clients, are left out: the SuperLink sync then unregisters their keys)."""
    if not client_ids:
        return NodeKeys(keys={})
    conn = session.connection()
    ids = sorted(set(client_ids))
    stmt = select(Client.id, Client.node_public_key).where(
        one_of(_CLIENT_ID, "ids", conn.dialect.name),
        Client.node_public_key.is_not(None),
        Client.status == "active",
    )
    # One array parameter on PostgreSQL (a list of 100,000 ids exceeds its 65,535 parameters),
    # chunks on SQLite.
    rows = [r for part in ledger.chunks(conn, ids) for r in conn.execute(stmt, {"ids": part})]
    return NodeKeys(keys={int(cid): str(pem) for cid, pem in rows})
