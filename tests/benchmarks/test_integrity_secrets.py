"""The secret and dead-token attacks of issue 24 (``benchmarks/integrity/secret_attacks.py``):
the public development secrets against a platform `mots platform up` started, and tokens made
dead four ways against every API of a freshly started platform."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.integrity import money

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[money.MoneyPlatform]:
    """One fresh platform with the honest population, shared by the attacks of this module."""
    p = money.start(tmp_path_factory.mktemp("secrets"))
    try:
        yield p
    finally:
        money.stop(p)


@pytest.mark.parametrize(
    "name", ["default_secret_forgery", "revoked_token_everywhere", "node_key_squat"]
)
def test_attack_is_refused(platform: money.MoneyPlatform, name: str) -> None:
    """Every try is refused (401, within 5 s for a dead token) and nothing is paid."""
    a = money.ATTACKS[name](platform)
    assert a.tried > 0
    assert a.refused_or_caught == a.tried, a.details
    assert a.as_dict()["paid"] == "0"
