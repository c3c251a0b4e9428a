"""Signed client tokens: any service verifies a client's bearer token without a database.

A token is ``mots.<client id>.<expiry, Unix s>.<nonce>.<HMAC-SHA256>``, the MAC over the first
four parts under ``MOTS_TOKEN_SECRET`` (shared by the services). Pricing and orchestration check
the MAC and the expiry (stateless, microseconds); the market also checks that the token is the
client's current one (its SHA-256 is stored, so a rotated or revoked token is refused there at
once, and every service within seconds through the revocation list,
:mod:`mots.platform.revocation`).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import secrets
from dataclasses import dataclass

PREFIX = "mots"
MAX_TOKEN_CHARS = 256


class Invalid(enum.StrEnum):
    """Why a token is refused (each answered 401)."""

    MALFORMED = "the token is not a platform token"
    FORGED = "the token's signature does not verify"
    EXPIRED = "the token has expired; renew it (POST /v1/me/token) before it does"


@dataclass(frozen=True, slots=True)
class Claim:
    """What a verified token says: whose it is and until when (Unix seconds)."""

    client_id: int
    expires_at: int


def _mac(secret: str, body: str) -> str:
    digest = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sign(client_id: int, expires_at: int, secret: str) -> str:
    """A fresh token for ``client_id`` valid until ``expires_at`` (a new nonce each call)."""
    body = f"{PREFIX}.{client_id}.{expires_at}.{secrets.token_hex(16)}"
    return f"{body}.{_mac(secret, body)}"


def parse(token: str) -> Claim | None:
    """The claim a token states, unverified (a client reads its own token's expiry with this)."""
    parts = token.split(".")
    if len(token) > MAX_TOKEN_CHARS or len(parts) != 5 or parts[0] != PREFIX:
        return None
    if not (
        parts[1].isascii() and parts[1].isdigit() and parts[2].isascii() and parts[2].isdigit()
    ):
        return None
    return Claim(int(parts[1]), int(parts[2]))


def verify(token: str, secret: str, now: float) -> Claim | Invalid:
    """The token's claim if its MAC verifies and it has not expired, else why not."""
    claim = parse(token)
    if claim is None:
        return Invalid.MALFORMED
    body, _, mac = token.rpartition(".")
    if not hmac.compare_digest(mac.encode(), _mac(secret, body).encode()):
        return Invalid.FORGED
    if claim.expires_at <= now:
        return Invalid.EXPIRED
    return claim
