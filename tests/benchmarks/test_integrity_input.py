"""The request-shape attacks of issue 24 (``benchmarks/integrity/input_attacks.py``) against a
freshly started platform over real HTTP (uvicorn, real Redis and Celery workers): each is refused
with a 4xx problem, none answers 5xx, and the ledger balances afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.integrity import money

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[money.MoneyPlatform]:
    """One fresh platform with the honest population, shared by the attacks of this module."""
    p = money.start(tmp_path_factory.mktemp("input"))
    try:
        yield p
    finally:
        money.stop(p)


@pytest.mark.parametrize(
    "name",
    ["deep_json", "cursor_overflow", "huge_non_json_body", "duplicate_keys", "code_guessing"],
)
def test_attack_is_refused(platform: money.MoneyPlatform, name: str) -> None:
    """Every try of the attack is refused (4xx problem, never 5xx) and nothing is paid."""
    a = money.ATTACKS[name](platform)
    assert a.tried > 0
    assert a.refused_or_caught == a.tried, a.details
    assert a.as_dict()["paid"] == "0"
    assert money.ledger_balanced(platform)
