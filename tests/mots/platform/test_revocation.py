"""Whether a service accepts a client token now (mots.platform.revocation): the revocation list
every process reads, and the refusals by reason."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from fastapi import HTTPException

from mots.platform import revocation, tokens
from mots.platform.settings import DEV_TOKEN_SECRET, PlatformSettings

REDIS = "redis://127.0.0.1:6379/0"


def test_a_published_token_is_dead_for_a_reader_within_its_refresh() -> None:
    """The market publishes; another process's list names it (and why) within REFRESH_S."""
    redis_url = "redis://127.0.0.1:6379/0"
    prefix = f"mots-test-{uuid.uuid4().hex[:8]}:"
    reader = revocation.RevocationList(redis_url, prefix)
    token, other = "mots.1.2.n.mac", "mots.2.2.n.mac"

    async def scenario() -> float:
        assert await reader.why_dead(token) is None
        revocation.publish(
            redis_url, prefix, revocation.verifier(token), "rotated", time.time() + 60
        )
        start = time.monotonic()
        while await reader.why_dead(token) is None:
            await asyncio.sleep(0.05)
        assert await reader.why_dead(other) is None
        return time.monotonic() - start

    took = asyncio.run(scenario())
    assert took <= revocation.REFRESH_S + 0.5
    assert asyncio.run(reader.why_dead(token)) == "rotated"


def test_each_refusal_names_its_reason() -> None:
    """Rotated and revoked tokens are 401 with their own codes, a revoked client 403, an expired
    or forged token 401 with ``token-expired``/``token-invalid``."""
    rotated, revoked = revocation.dead_token("rotated"), revocation.dead_token("revoked")
    client = revocation.dead_token("client-revoked")
    assert (rotated.status_code, rotated.code) == (401, "token-rotated")
    assert (revoked.status_code, revoked.code) == (401, "token-revoked")
    assert (client.status_code, client.code) == (403, "client-revoked")
    expired = revocation.invalid_token(tokens.Invalid.EXPIRED)
    forged = revocation.invalid_token(tokens.Invalid.FORGED)
    assert expired.code == "token-expired" and forged.code == "token-invalid"
    assert rotated.headers == {"WWW-Authenticate": "Bearer"}


def test_client_claim_checks_signature_and_expiry() -> None:
    """A token signed with the services' secret verifies until its expiry; another secret's not."""
    settings = PlatformSettings()
    good = tokens.sign(7, int(time.time()) + 60, DEV_TOKEN_SECRET)
    assert revocation.client_claim(good, settings) == tokens.Claim(7, int(good.split(".")[2]))
    forged = tokens.sign(7, int(time.time()) + 60, "x" * 32)
    assert revocation.client_claim(forged, settings) is tokens.Invalid.FORGED


def test_a_burst_after_a_quiet_spell_waits_for_one_read_not_503() -> None:
    """Quiet past the staleness bound, then 100 concurrent checks: each waits for the one read
    in flight and is answered (issue 37: 99 of 100 were 503 while the first one's read ran)."""
    prefix = f"mots-test-{uuid.uuid4().hex[:8]}:"
    reader = revocation.RevocationList(REDIS, prefix, refresh_s=0.05, max_stale_s=0.1)

    async def scenario() -> list[object]:
        assert await reader.why_dead("mots.1.2.n.mac") is None
        await asyncio.sleep(0.3)
        checks = (reader.why_dead("mots.1.2.n.mac") for _ in range(100))
        return list(await asyncio.gather(*checks, return_exceptions=True))

    assert asyncio.run(scenario()) == [None] * 100


def test_an_unreadable_list_is_503_after_its_bound() -> None:
    """Redis that cannot be reached (nothing listens there): no list read within the bound, so
    a client token is answered 503 with Retry-After, not admitted unchecked."""
    reader = revocation.RevocationList("redis://127.0.0.1:1/0", "x:", refresh_s=0.05)
    with pytest.raises(HTTPException) as refused:
        asyncio.run(reader.why_dead("mots.1.2.n.mac"))
    assert refused.value.status_code == 503 and refused.value.headers == {"Retry-After": "1"}


def test_republish_puts_the_durable_list_on_a_new_prefix() -> None:
    """The market's rows published to a prefix nobody wrote before: a reader there names each
    unexpired token's reason; an expired one is not listed."""
    prefix = f"mots-test-{uuid.uuid4().hex[:8]}:"
    now = time.time()
    revocation.republish(
        REDIS, prefix, [("a" * 64, "rotated", now + 60), ("b" * 64, "revoked", now - 1)]
    )
    reader = revocation.RevocationList(REDIS, prefix)
    assert asyncio.run(reader.why_dead_now("x")) is None
    assert reader._dead == {"a" * 64: "rotated"}
