"""The market's model-signing key (issue 40 item 5): one ed25519 key per deployment, derived
(HKDF-SHA256) from the deployment's own secret ``MOTS_TOKEN_SECRET``. Every market process of a
deployment derives the same key, with nothing written anywhere: the artifact volume is read-only
for the market in compose and k3s, and several API replicas must sign alike. A new deployment (a
new secret) has its own key; rotating the secret rotates it."""

from __future__ import annotations

from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_INFO = b"mots model-signing key v1"
"""HKDF's context: keeps this key apart from anything else derived from the same secret."""


@lru_cache(maxsize=8)
def signing_key(secret: str) -> Ed25519PrivateKey:
    """The deployment's ed25519 key, derived from its secret (the same secret, the same key)."""
    seed = HKDF(algorithm=SHA256(), length=32, salt=None, info=KEY_INFO).derive(secret.encode())
    return Ed25519PrivateKey.from_private_bytes(seed)
