"""Signed client tokens: what verifies, and every way a token is refused."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

from mots.platform import tokens

SECRET = "test-secret"


def test_a_signed_token_verifies_until_it_expires() -> None:
    """The claim is the client id and expiry it was signed with; at expiry it is refused."""
    t = tokens.sign(7, 1000, SECRET)
    assert tokens.verify(t, SECRET, 999.5) == tokens.Claim(7, 1000)
    assert tokens.verify(t, SECRET, 1000) is tokens.Invalid.EXPIRED
    assert tokens.parse(t) == tokens.Claim(7, 1000)
    assert tokens.sign(7, 1000, SECRET) != t  # a fresh nonce each time


def test_another_key_or_an_edited_claim_does_not_verify() -> None:
    """A token signed with another secret, or with its client id or expiry changed, is forged."""
    t = tokens.sign(7, 10**10, SECRET)
    assert tokens.verify(t, "other-secret", 0) is tokens.Invalid.FORGED
    _, client, expiry, nonce, mac = t.split(".")
    for edited in (f"mots.8.{expiry}.{nonce}.{mac}", f"mots.{client}.{10**11}.{nonce}.{mac}"):
        assert tokens.verify(edited, SECRET, 0) is tokens.Invalid.FORGED


@given(st.text(max_size=300))
def test_arbitrary_text_is_never_a_valid_token(text: str) -> None:
    """No string that was not signed with the key verifies (nor does parsing raise)."""
    assert isinstance(tokens.verify(text, SECRET, 0), tokens.Invalid)
