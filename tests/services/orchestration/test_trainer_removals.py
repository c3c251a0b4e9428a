"""MarketRemovals: who the market no longer hands a key for is removed, once and for good; a
rotated key is no removal; a failed read keeps what was known; the market is asked at most once
per interval."""

from __future__ import annotations

from services.orchestration.trainer import MarketRemovals


def test_removals_follow_the_market_keys() -> None:
    market = {1: "a", 2: "b", 3: "c"}
    asked: list[list[int]] = []

    def fetch(ids: list[int]) -> dict[int, str]:
        asked.append(ids)
        if market.get(0) == "down":
            raise ConnectionError("market away")
        return {c: k for c, k in market.items() if c in ids}

    removed = MarketRemovals({1: "a", 2: "b", 3: "c"}, fetch, interval_s=0.0)
    assert removed() == set()
    market[2] = "b2"  # rotated: still enrolled
    del market[3]  # revoked or departed
    assert removed() == {3}
    market[0] = "down"
    assert removed() == {3}  # a failed read keeps what was known
    del market[0]
    market[3] = "c"
    assert removed() == {3}  # a removal stays
    slow = MarketRemovals({1: "a"}, fetch, interval_s=3600.0)
    n = len(asked)
    slow(), slow()
    assert len(asked) == n + 1


def test_an_unanswered_ask_is_no_news() -> None:
    """The training worker's asks are not waited on: until the market answers, fetch gives None
    and nothing changes; the answer, when it comes, is applied."""
    answers: list[dict[int, str] | None] = [None, None, {1: "a"}]
    removed = MarketRemovals({1: "a", 2: "b"}, lambda ids: answers.pop(0), interval_s=0.0)
    assert removed() == set()
    assert removed() == set()
    assert removed() == {2}
