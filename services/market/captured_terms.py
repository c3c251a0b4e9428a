"""A round's realised terms captured within its quote and budget, in micro-units (the
settlement's amounts: :func:`mots.economics.capture.capture`, docs/mechanisms.md's capture rule)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from mots.economics.capture import capture
from mots.platform.contracts import OpenRoundPayload, SettlePayload
from mots.platform.money import to_micros


@dataclass(frozen=True)
class CapturedTerms:
    """What settlement books, in micro-units: per-type rewards, the buyers' price, the cap."""

    rewards: dict[str, int]
    price: int
    budget: int
    rule: str


def captured_terms(
    quote: OpenRoundPayload,
    payload: SettlePayload,
    participants: dict[str, int],
    buyers: int,
    default_budget: Decimal,
    joined: dict[str, int] | None = None,
) -> CapturedTerms:
    """The realised terms of ``payload`` captured within ``quote`` and the round's budget.

    ``participants`` counts the participants booked per type, ``buyers`` the paid purchases (all
    at the quoted price), ``joined`` the declared joiners per type (booked or not; default
    ``participants``): a type that did not over-join its quoted K*_i is paid its quote as far as
    the round's money and the budget fund it (rule 3). A type the quote does not name was
    authorised nothing. Pure: the amounts of :func:`mots.economics.capture.capture` in
    micro-units (quantum 1).
    """
    names = sorted(set(payload.rewards) | set(participants) | set(joined or {}))
    declared = participants if joined is None else joined
    budget = to_micros(quote.subsidy_budget if quote.subsidy_budget is not None else default_budget)
    quoted_price = to_micros(quote.price)
    realised_price = quoted_price if payload.price is None else to_micros(payload.price)
    k = np.array([participants.get(n, 0) for n in names], dtype=np.float64)
    c = capture(
        quoted_price,
        [to_micros(quote.rewards.get(n, 0)) for n in names],
        realised_price,
        [to_micros(payload.rewards.get(n, 0)) for n in names],
        k,
        np.array([buyers], dtype=np.float64),
        budget,
        quantum=1.0,
        quoted_participants=[quote.target_participants.get(n, 0) for n in names],
        joined=[declared.get(n, 0) for n in names],
    )
    rewards = {n: int(x) for n, x in zip(names, c.rewards.tolist(), strict=True)}
    return CapturedTerms(rewards, int(c.price), budget, c.rule())
