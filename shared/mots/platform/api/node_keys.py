"""The market's SuperNode-key bodies: a client registers the public key of the node it trains on,
proving possession by signing a challenge, and may renew its token with the same proof
(``services/market/node_keys.py``, ``services/market/api/routes/tokens.py``)."""

from __future__ import annotations

from pydantic import Field

from mots.platform.api.base import Schema, example
from mots.platform.timestamps import Timestamp

MAX_PUBLIC_KEY_CHARS = 4096


class NodeKeyProof(Schema):
    """Proof that the caller holds a SuperNode's private key: the key's signature over a
    challenge the market issued (to register the key, or to renew a token with it)."""

    model_config = example({"challenge": "nkr.7.1767225600.9f2c….Q2x…", "signature": "MGUCMQ…"})

    challenge: str = Field(
        ...,
        min_length=1,
        max_length=256,
        description="a challenge the market issued this client (POST /v1/me/node-key/challenge,"
        " or POST /v1/clients/{id}/token/challenge to renew a token)",
    )
    signature: str = Field(
        ...,
        min_length=1,
        max_length=512,
        description="the challenge signed with the node's private key (ECDSA-SHA256, DER,"
        " base64url): proof that the caller holds the key",
    )


class NodeKeyIn(NodeKeyProof):
    """The public key of the SuperNode a client trains on (EC on a NIST curve, PEM or OpenSSH):
    the SuperLink admits the node that holds its private key, as this client."""

    model_config = example(
        {
            "challenge": "nkc.7.1767225600.9f2c….Q2x…",
            "signature": "MGUCMQ…",
            "public_key": "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV0U2w0WZ2YB/++Tpockg= pi-07",
        }
    )

    public_key: str = Field(..., min_length=1, max_length=MAX_PUBLIC_KEY_CHARS)


class NodeKeyChallenge(Schema):
    """A challenge to sign with the SuperNode's private key, bound to this client, short-lived."""

    model_config = example(
        {"challenge": "nkc.7.1767225600.9f2c….Q2x…", "expires_at": "2026-01-01T00:00:00Z"}
    )

    challenge: str
    expires_at: Timestamp = Field(..., description="after this it is refused (RFC 3339, UTC)")


class NodeKeyOut(Schema):
    """A client's registered SuperNode key: its id and the key's SHA-256 (PEM form)."""

    model_config = example(
        {
            "client_id": 7,
            "node_key_sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
        }
    )

    client_id: int
    node_key_sha256: str
