"""Proof of possession of a SuperNode key (mots.platform.node_proof): only the key's holder can
answer the market's challenge, and nothing but its exact signature passes."""

from __future__ import annotations

from pathlib import Path

from mots.platform.node_proof import sign_challenge, signed_by
from mots.training.pki import make_node_key


def test_only_the_holders_signature_of_this_challenge_passes(tmp_path: Path) -> None:
    mine, other = make_node_key(tmp_path / "mine.key"), make_node_key(tmp_path / "other.key")
    signature = sign_challenge(mine.private_key, "challenge-1")
    assert signed_by(mine.public_pem, "challenge-1", signature)
    assert not signed_by(mine.public_pem, "challenge-2", signature)  # another challenge
    assert not signed_by(other.public_pem, "challenge-1", signature)  # another device's key
    assert not signed_by(mine.public_pem, "challenge-1", "not base64 !")
    assert not signed_by(mine.public_pem, "challenge-1", signature[:-8])
