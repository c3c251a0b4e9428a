"""The platform's signature on a model it publishes (issue 40 item 5): ed25519, one key per
deployment, so that a buyer can check offline that a model file came from this market.

The market signs a *statement*, the canonical JSON of the market round, the file's SHA-256 and the
price the round sold at; the signature travels in the model's metadata (``GET
/v1/rounds/{id}/model/info``, the ``.json`` a download writes beside the file). The public half is
on the market's ``GET /.well-known/mots-model-key``; :func:`verify` needs nothing else (no
server), so a buyer who saved that key once checks every later file with it
(`mots model verify FILE --public-key KEY`).
"""

from __future__ import annotations

import base64
import hashlib
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ALGORITHM = "ed25519"
WELL_KNOWN_PATH = "/.well-known/mots-model-key"


def statement(round_id: int, sha256: str, price: str | None) -> bytes:
    """What the market signs: round, digest (lower-case hex) and price, as canonical JSON."""
    body = {"round_id": int(round_id), "sha256": sha256.lower(), "price": price}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def public_key_text(key: Ed25519PublicKey) -> str:
    """The raw 32-byte public key, base64 (as the well-known route gives it)."""
    return base64.b64encode(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def key_id(public_key: str) -> str:
    """A short name of a public key: the first 16 hex digits of the SHA-256 of its raw bytes
    (``not-a-key`` for text that is not base64)."""
    try:
        raw = base64.b64decode(public_key, validate=True)
    except ValueError:
        return "not-a-key"
    return hashlib.sha256(raw).hexdigest()[:16]


def sign(key: Ed25519PrivateKey, message: bytes) -> str:
    """The base64 ed25519 signature of ``message``."""
    return base64.b64encode(key.sign(message)).decode()


def verify(public_key: str, message: bytes, signature: str) -> bool:
    """Whether ``signature`` (base64) is the holder of ``public_key``'s (base64) on
    ``message``; a malformed key or signature is simply not a valid signature."""
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        key.verify(base64.b64decode(signature, validate=True), message)
    except (InvalidSignature, ValueError):
        return False
    return True
