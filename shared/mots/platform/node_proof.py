"""Proof that a device holds a SuperNode key: its ECDSA-SHA256 signature over a challenge the
market issued (``POST /v1/me/node-key/challenge``), checked before ``PUT /v1/me/node-key``
registers the public key, so no client can register another device's key (issue 24).

In the platform layer because both sides use it: the client SDK and the edge agent sign, the
market verifies.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


def sign_challenge(private_key: Path, challenge: str) -> str:
    """A proof that this device holds ``private_key``: its ECDSA-SHA256 signature of the market's
    ``challenge`` (base64url, DER), for ``PUT /v1/me/node-key``."""
    import base64

    key = serialization.load_ssh_private_key(private_key.read_bytes(), None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{private_key}: expected an EC private key (NIST P-384), got {type(key)}")
    signature = key.sign(challenge.encode(), ec.ECDSA(hashes.SHA256()))
    return base64.urlsafe_b64encode(signature).decode()


def signed_by(public_pem_bytes: bytes, challenge: str, signature: str) -> bool:
    """Whether ``signature`` (from :func:`sign_challenge`) is the key's signature of
    ``challenge``: proof that the caller holds the private key of ``public_pem_bytes``."""
    import base64
    import binascii

    from cryptography.exceptions import InvalidSignature

    key = serialization.load_pem_public_key(public_pem_bytes)
    if not isinstance(key, ec.EllipticCurvePublicKey):
        return False
    try:
        raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        key.verify(raw, challenge.encode(), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True
