"""SuperNode keys: a client registers the public key of the device it trains on; the orchestration
reads the keys of a round's participants and registers exactly those with the SuperLink.

The key is a client's own declaration, made with its own token; the SuperLink then admits only
the device that holds the matching private key, and the training result names that device's
participant. One key belongs to one client.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.bulk import one_of
from mots.platform.schemas import NodeKeyOut, NodeKeys
from mots.training.pki import fingerprint, public_pem_from_text
from services.market import ledger
from services.market.errors import Conflict
from services.market.models import Client

_CLIENT_ID = Client.metadata.tables[Client.__tablename__].c.id


def normalised(public_key: str) -> bytes:
    """The key as the SuperLink registers it (PEM SubjectPublicKeyInfo); ValueError naming
    ``public_key`` and the rule when it is not an EC key on a NIST curve in PEM or OpenSSH form."""
    return public_pem_from_text(public_key)


def register(session: Session, client: Client, pem: bytes) -> NodeKeyOut:
    """Record ``pem`` as ``client``'s SuperNode key (replacing an earlier one); Conflict when
    another client registered the same key."""
    digest = fingerprint(pem)
    owner = session.scalar(select(Client.id).where(Client.node_key_sha256 == digest))
    if owner is not None and owner != client.id:
        raise Conflict("public_key", "this key is registered by another client")
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
