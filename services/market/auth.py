"""Client credentials: a random bearer token shown once at registration, stored as its SHA-256.

Tokens carry 256 bits of randomness, so an unsalted SHA-256 is a sound verifier (no dictionary
to attack); the operator's token comes from ``MOTS_OPERATOR_TOKEN`` and is compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "mots_"


def new_token() -> str:
    """A fresh client token."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored verifier of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def is_operator(token: str, operator_token: str) -> bool:
    """Whether ``token`` is the operator's (constant-time comparison)."""
    return hmac.compare_digest(token.encode(), operator_token.encode())
