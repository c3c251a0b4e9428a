"""A client's answer to a published QuoteOut: Eq. (6) at its facts and the targets' tie rule."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mots.client import ClientFacts, draw_place, respond, targets_for, tie_draw
from mots.economics.best_response import TIE_TOLERANCE, Targets
from mots.platform.api.base import Strategy
from mots.platform.api.market import QuoteOut


def quote(**over: Any) -> QuoteOut:
    """A QuoteOut as GET /v1/quote returns it."""
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
    return QuoteOut.model_validate(body)


SMALL = ClientFacts("small", 150, Decimal("0.3"))
LARGE = ClientFacts("large", 300, Decimal("0.6"))


def test_payoffs_follow_eq_6() -> None:
    """π(A) = 0, π(J) = U − C_i + r_i, π(B) = U − p at the published state."""
    choice = respond(SMALL, quote(), utility=10.0, place=0.0)
    assert choice.payoffs == {
        Strategy.ABSTAIN: 0.0,
        Strategy.JOIN: pytest.approx(10.0 - 0.3 - 1.25),
        Strategy.BUY: pytest.approx(10.0 - 2.5),
    }


def test_strict_best_response_is_the_argmax() -> None:
    """A clear winner is chosen whatever the place: join, buy or abstain."""
    q = quote()
    assert respond(SMALL, q, 10.0, 3.9).strategy is Strategy.JOIN  # 8.45 > 7.5 > 0
    costly = ClientFacts("small", 150, Decimal("3"))
    assert respond(costly, q, 10.0, 0.0).strategy is Strategy.BUY  # 5.75 < 7.5
    assert respond(costly, q, 1.0, 0.0).strategy is Strategy.ABSTAIN  # both < 0


def test_unpriced_type_cannot_join() -> None:
    """A type the market prices no reward for can only buy or abstain."""
    stranger = ClientFacts("medium", 200, Decimal("0"))
    choice = respond(stranger, quote(), 10.0, 0.0)
    assert Strategy.JOIN not in choice.payoffs
    assert choice.strategy is Strategy.BUY
    assert targets_for(quote(), "medium") == Targets(0, 0)


def test_swan_join_buy_tie_is_split_by_the_targets() -> None:
    """With r_i + p = C_i (SWAN's terms) J and B tie: places below K* join, the next B* buy."""
    # large: r = 4.0, p = 2.5 → C = 6.5 makes π(J) = π(B)
    facts = ClientFacts("large", 300, Decimal("6.5"))
    picks = [respond(facts, quote(), 10.0, place).strategy for place in range(4)]
    assert picks == [Strategy.JOIN, Strategy.JOIN, Strategy.BUY, Strategy.BUY]  # K*=2, B*=2


def test_a_drawn_place_splits_the_tie_by_the_targets_share() -> None:
    """An edge device's place is draw·(K*+B*): it joins for draws below K*/(K*+B*) = 1/2."""
    facts = ClientFacts("large", 300, Decimal("6.5"))
    q = quote()
    targets = targets_for(q, "large")
    picks = [respond(facts, q, 10.0, targets.place_of_draw(d)).strategy for d in (0, 0.49, 0.5)]
    assert picks == [Strategy.JOIN, Strategy.JOIN, Strategy.BUY]
    assert draw_place(q, "large", 7) == pytest.approx(4 * tie_draw(7, q.round_id))


def test_tie_with_abstaining() -> None:
    """At zero payoff the client acquires the model if its type is targeted, else abstains."""
    buyer = ClientFacts("large", 300, Decimal("100"))  # π(J) < 0 = π(B) = π(A)
    q = quote(price="10")
    assert respond(buyer, q, 10.0, draw_place(q, "large", 1)).strategy is Strategy.BUY
    untargeted = quote(
        price="10",
        types=[{"type_name": "large", "reward": "4", "target_participants": 0, "target_buyers": 0}],
    )
    assert respond(buyer, untargeted, 10.0, 0.0).strategy is Strategy.ABSTAIN


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
    types = [{"type_name": "t", "reward": reward, "target_participants": k, "target_buyers": b}]
    q = quote(price=price, types=types)
    place = targets_for(q, "t").place_of_draw(draw)
    choice = respond(ClientFacts("t", 10, cost), q, utility, place)
    assert choice.payoffs[choice.strategy] >= max(choice.payoffs.values()) - TIE_TOLERANCE


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"price": "abc"}, "price"),
        ({"round_id": "x"}, "round_id"),
        (
            {"types": [{"type_name": "t", "target_participants": 1, "target_buyers": 0}]},
            "types.0.reward",
        ),
    ],
)
def test_malformed_quote_names_the_field(change: dict[str, Any], field: str) -> None:
    """A quote the client cannot read is refused (by QuoteOut) with the offending field named."""
    with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
        quote(**change)


def test_facts_are_validated() -> None:
    """Impossible private facts are refused with the field named."""
    with pytest.raises(ValueError, match="data_size"):
        ClientFacts("t", 0, Decimal(1))
    with pytest.raises(ValueError, match="cost"):
        ClientFacts("t", 1, Decimal(-1))
    with pytest.raises(ValueError, match="type_name"):
        ClientFacts("", 1, Decimal(1))


def test_tie_draw_is_reproducible_and_spread() -> None:
    """Same (client, round) → same draw; draws over many clients fill [0, 1) evenly."""
    assert tie_draw(7, 3) == tie_draw(7, 3)
    assert tie_draw(7, 3) != tie_draw(7, 4)
    draws = [tie_draw(c, 1) for c in range(2000)]
    assert all(0.0 <= d < 1.0 for d in draws)
    assert 0.45 < sum(d < 0.5 for d in draws) / len(draws) < 0.55
