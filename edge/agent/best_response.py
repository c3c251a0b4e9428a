"""A client's best response to the market's published quote, by its payoff of Eq. (6).

The client knows only its private facts (type, data size D_i, cost C_i) and what the market
publishes for the round: the price p, the reward r_i of each type, the predicted error ε of the
announced state K* and the targets K*_i, B*_i (Section 3.C: incomplete information). Taking that
state as given, its payoffs are π(A) = 0, π(J) = U(ε) − C_i + r_i and π(B) = U(ε) − p (Eq. 6).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from mots.platform.schemas import Strategy

TIE_TOLERANCE = 1e-6
"""Payoffs closer than one micro-unit of money are a tie (money is booked in micro-units)."""


@dataclass(frozen=True)
class ClientFacts:
    """What only the client knows: its type label, data size D_i and participation cost C_i."""

    type_name: str
    data_size: int
    cost: Decimal

    def __post_init__(self) -> None:
        if not self.type_name:
            raise ValueError("type_name: must be a non-empty type label")
        if self.data_size < 1:
            raise ValueError(f"data_size: must be ≥ 1 sample, got {self.data_size}")
        if not self.cost.is_finite() or self.cost < 0:
            raise ValueError(f"cost: must be a finite amount ≥ 0, got {self.cost}")


@dataclass(frozen=True)
class TypeTerms:
    """The published terms of one type: reward r_i and the announced K*_i and B*_i."""

    type_name: str
    reward: Decimal
    target_participants: int
    target_buyers: int


@dataclass(frozen=True)
class PublishedQuote:
    """One round's quote as the market publishes it (``GET /v1/quote``)."""

    round_id: int
    state: str
    price: Decimal
    epsilon: float
    types: tuple[TypeTerms, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PublishedQuote:
        """Read the market's QuoteOut JSON; a missing or malformed field is named in the error."""

        def field(obj: Mapping[str, Any], name: str, where: str) -> Any:
            if name not in obj:
                raise ValueError(f"quote: {where}{name} is missing")
            return obj[name]

        def money(value: Any, where: str) -> Decimal:
            try:
                d = Decimal(str(value))
            except InvalidOperation as exc:
                raise ValueError(f"quote: {where} must be a decimal amount, got {value!r}") from exc
            if not d.is_finite():
                raise ValueError(f"quote: {where} must be finite, got {value!r}")
            return d

        def count(value: Any, where: str) -> int:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"quote: {where} must be an integer ≥ 0, got {value!r}")
            return value

        raw_types = field(data, "types", "")
        if not isinstance(raw_types, list):
            raise ValueError("quote: types must be a list")
        types = tuple(
            TypeTerms(
                type_name=str(field(t, "type_name", f"types[{i}].")),
                reward=money(field(t, "reward", f"types[{i}]."), f"types[{i}].reward"),
                target_participants=count(
                    field(t, "target_participants", f"types[{i}]."),
                    f"types[{i}].target_participants",
                ),
                target_buyers=count(
                    field(t, "target_buyers", f"types[{i}]."), f"types[{i}].target_buyers"
                ),
            )
            for i, t in enumerate(raw_types)
        )
        epsilon = field(data, "epsilon", "")
        if not isinstance(epsilon, int | float) or isinstance(epsilon, bool) or epsilon <= 0:
            raise ValueError(f"quote: epsilon must be a number > 0, got {epsilon!r}")
        return cls(
            round_id=count(field(data, "round_id", ""), "round_id"),
            state=str(field(data, "state", "")),
            price=money(field(data, "price", ""), "price"),
            epsilon=float(epsilon),
            types=types,
        )

    def terms_for(self, type_name: str) -> TypeTerms | None:
        """The terms of ``type_name``, or None when the market prices no such type."""
        return next((t for t in self.types if t.type_name == type_name), None)


@dataclass(frozen=True)
class Choice:
    """The chosen strategy, the payoff of every available strategy (Eq. 6) and why."""

    strategy: Strategy
    payoffs: dict[Strategy, float]
    reason: str


def payoffs(facts: ClientFacts, quote: PublishedQuote, utility: float) -> dict[Strategy, float]:
    """π_n for each available strategy at the published state (Eq. 6): A → 0, J, B.

    ``utility`` is U(ε) at the quote's ε. Joining is available only when the market publishes a
    reward for the client's type.
    """
    out = {Strategy.ABSTAIN: 0.0, Strategy.BUY: utility - float(quote.price)}
    terms = quote.terms_for(facts.type_name)
    if terms is not None:
        out[Strategy.JOIN] = utility - float(facts.cost) + float(terms.reward)
    return out


def tie_draw(client_id: int, round_id: int) -> float:
    """A reproducible number in [0, 1) per (client, round), to split ties as the targets ask."""
    digest = hashlib.sha256(f"mots-tie:{client_id}:{round_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def best_response(facts: ClientFacts, quote: PublishedQuote, utility: float, draw: float) -> Choice:
    """argmax over {A, J, B} of Eq. (6); exact ties follow the market's published targets.

    Under SWAN, π(J) and π(B) at the announced state are equal (both τ[θ(K) − L₀]), so a client
    is indifferent between them there; the tie goes to joining with probability
    K*_i / (K*_i + B*_i) (``draw`` in [0, 1)), which reproduces the announced state in expectation.
    A tie with abstaining (payoff 0) goes to acquiring the model when the targets include the type.
    """
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"draw: must lie in [0, 1), got {draw}")
    pay = payoffs(facts, quote, utility)
    terms = quote.terms_for(facts.type_name)
    best = max(pay.values())
    tied = {s for s, v in pay.items() if best - v <= TIE_TOLERANCE}
    if len(tied) == 1:
        (only,) = tied
        return Choice(only, pay, f"{only.value} has the highest payoff ({best:.6f})")

    k = terms.target_participants if terms else 0
    b = terms.target_buyers if terms else 0
    acquiring = tied - {Strategy.ABSTAIN}
    if Strategy.ABSTAIN in tied and (k + b == 0 or not acquiring):
        return Choice(Strategy.ABSTAIN, pay, "tie with abstaining; the targets leave this type out")
    if acquiring == {Strategy.JOIN, Strategy.BUY}:
        share = k / (k + b) if k + b else 0.0
        pick = Strategy.JOIN if draw < share else Strategy.BUY
        return Choice(
            pick, pay, f"join/buy tie split by the targets K*={k}, B*={b} (draw {draw:.3f})"
        )
    (pick,) = acquiring
    return Choice(pick, pay, f"{pick.value} ties with abstaining; the targets include this type")
