"""SuperNode keys: a client registers the public key of the device it trains on; the orchestration
reads the keys of a round's participants and registers exactly those with the SuperLink.

The key is a client's own declaration, made with its own token; the SuperLink then admits only
the device that holds the matching private key, and the training result names that device's
participant. One key belongs to one client.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.schemas import NodeKeyOut, NodeKeys
from mots.training.pki import fingerprint, public_pem_from_text
from services.market.errors import Conflict
from services.market.models import Client


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
    """The registered keys of ``client_ids`` (clients without one are left out)."""
    if not client_ids:
        return NodeKeys(keys={})
    rows = session.execute(
        select(Client.id, Client.node_public_key).where(
            Client.id.in_(client_ids), Client.node_public_key.is_not(None)
        )
    ).all()
    return NodeKeys(keys={int(cid): str(pem) for cid, pem in rows})
