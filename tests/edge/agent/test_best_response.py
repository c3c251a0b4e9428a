"""The agent's decision: Eq. (6) payoffs at the published state and the tie rules."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.agent.best_response import (
    TIE_TOLERANCE,
    ClientFacts,
    PublishedQuote,
    best_response,
    payoffs,
    tie_draw,
)
from mots.platform.schemas import Strategy


def quote_json(**over: Any) -> dict[str, Any]:
    """A QuoteOut body as GET /v1/quote returns it."""
    body: dict[str, Any] = {
        "round_id": 3,
        "state": "collecting",
        "mechanism": "swan_robust",
        "price": "2.5",
        "types": [
            {"type_name": "small", "reward": "-1.25", "target_participants": 4, "target_buyers": 0},
            {"type_name": "large", "reward": "4.0", "target_participants": 2, "target_buyers": 2},
        ],
        "epsilon": 0.6,
        "welfare": 10.0,
        "incentive_cost": "0",
    }
    body.update(over)
    return body


SMALL = ClientFacts("small", 150, Decimal("0.3"))
LARGE = ClientFacts("large", 300, Decimal("0.6"))


def test_payoffs_follow_eq_6() -> None:
    """π(A) = 0, π(J) = U − C_i + r_i, π(B) = U − p at the published state."""
    q = PublishedQuote.from_json(quote_json())
    pay = payoffs(SMALL, q, utility=10.0)
    assert pay == {
        Strategy.ABSTAIN: 0.0,
        Strategy.JOIN: pytest.approx(10.0 - 0.3 - 1.25),
        Strategy.BUY: pytest.approx(10.0 - 2.5),
    }


def test_strict_best_response_is_the_argmax() -> None:
    """A clear winner is chosen whatever the draw: join, buy or abstain."""
    q = PublishedQuote.from_json(quote_json())
    assert best_response(SMALL, q, 10.0, 0.99).strategy is Strategy.JOIN  # 8.45 > 7.5 > 0
    costly = ClientFacts("small", 150, Decimal("3"))
    assert best_response(costly, q, 10.0, 0.0).strategy is Strategy.BUY  # 5.75 < 7.5
    assert best_response(costly, q, 1.0, 0.0).strategy is Strategy.ABSTAIN  # both < 0


def test_unpriced_type_cannot_join() -> None:
    """A type the market prices no reward for can only buy or abstain."""
    q = PublishedQuote.from_json(quote_json())
    stranger = ClientFacts("medium", 200, Decimal("0"))
    pay = payoffs(stranger, q, 10.0)
    assert Strategy.JOIN not in pay
    assert best_response(stranger, q, 10.0, 0.0).strategy is Strategy.BUY


def test_swan_join_buy_tie_is_split_by_the_targets() -> None:
    """With r_i + p = C_i (SWAN's terms) J and B tie; the draw picks J with share K*/(K*+B*)."""
    # large: r = 4.0, p = 2.5 → C = 6.5 makes π(J) = π(B)
    facts = ClientFacts("large", 300, Decimal("6.5"))
    q = PublishedQuote.from_json(quote_json())
    picks = [best_response(facts, q, 10.0, d).strategy for d in (0.0, 0.49, 0.5, 0.99)]
    assert picks == [Strategy.JOIN, Strategy.JOIN, Strategy.BUY, Strategy.BUY]  # K*=2, B*=2


def test_tie_with_abstaining() -> None:
    """At zero payoff the client acquires the model if its type is targeted, else abstains."""
    q = PublishedQuote.from_json(quote_json(price="10"))
    buyer = ClientFacts("large", 300, Decimal("100"))  # π(J) < 0 = π(B) = π(A)
    assert best_response(buyer, q, 10.0, 0.0).strategy is Strategy.BUY
    untargeted = quote_json(price="10")
    untargeted["types"][1].update(target_participants=0, target_buyers=0)
    q2 = PublishedQuote.from_json(untargeted)
    assert best_response(buyer, q2, 10.0, 0.0).strategy is Strategy.ABSTAIN


@settings(max_examples=200, deadline=None)
@given(
    utility=st.floats(0, 1e4),
    price=st.decimals(-100, 100, places=6),
    reward=st.decimals(-100, 100, places=6),
    cost=st.decimals(0, 100, places=6),
    k=st.integers(0, 20),
    b=st.integers(0, 20),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_choice_is_always_a_best_response(
    utility: float, price: Decimal, reward: Decimal, cost: Decimal, k: int, b: int, draw: float
) -> None:
    """Whatever the numbers, the chosen strategy's payoff is within the tie tolerance of the max."""
    body = quote_json(price=str(price))
    body["types"] = [
        {"type_name": "t", "reward": str(reward), "target_participants": k, "target_buyers": b}
    ]
    choice = best_response(
        ClientFacts("t", 10, cost), PublishedQuote.from_json(body), utility, draw
    )
    assert choice.payoffs[choice.strategy] >= max(choice.payoffs.values()) - TIE_TOLERANCE


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"price": "abc"}, "price"),
        ({"epsilon": -1}, "epsilon"),
        ({"round_id": "x"}, "round_id"),
        (
            {
                "types": [
                    {"type_name": "t", "reward": "1", "target_participants": -1, "target_buyers": 0}
                ]
            },
            "types[0].target_participants",
        ),
        (
            {"types": [{"type_name": "t", "target_participants": 1, "target_buyers": 0}]},
            "types[0].reward",
        ),
    ],
)
def test_malformed_quote_names_the_field(change: dict[str, Any], field: str) -> None:
    """A quote the agent cannot read is refused with the offending field named."""
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        PublishedQuote.from_json(quote_json(**change))


def test_facts_are_validated() -> None:
    """Impossible private facts are refused with the field named."""
    with pytest.raises(ValueError, match="data_size"):
        ClientFacts("t", 0, Decimal(1))
    with pytest.raises(ValueError, match="cost"):
        ClientFacts("t", 1, Decimal(-1))
    with pytest.raises(ValueError, match="draw"):
        best_response(SMALL, PublishedQuote.from_json(quote_json()), 1.0, 1.0)


def test_tie_draw_is_reproducible_and_spread() -> None:
    """Same (client, round) → same draw; draws over many clients fill [0, 1) evenly."""
    assert tie_draw(7, 3) == tie_draw(7, 3)
    draws = [tie_draw(c, 1) for c in range(2000)]
    assert all(0.0 <= d < 1.0 for d in draws)
    assert 0.45 < sum(d < 0.5 for d in draws) / len(draws) < 0.55
