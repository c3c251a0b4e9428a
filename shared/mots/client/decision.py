"""A client's answer to a published quote: the economics core's best response (Eq. 6) at its facts.

The glue between the market's :class:`~mots.platform.api.market.QuoteOut` and
:func:`mots.economics.best_response.best_response`; the edge agent and the platform's simulated
clients both decide through :func:`respond`. Its ``place`` argument is the client's place in its
type's queue (the tie rule of :mod:`mots.economics.best_response`): the rank among its type when
the caller knows it, else :func:`draw_place` of a reproducible draw.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal

from mots.economics.best_response import Choice, Targets, best_response, payoffs
from mots.platform.api.market import QuoteOut, TypeQuote


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


def terms_for(quote: QuoteOut, type_name: str) -> TypeQuote | None:
    """The published terms (r_i, K*_i, B*_i) of ``type_name``, or None when it is not priced."""
    return next((t for t in quote.types if t.type_name == type_name), None)


def targets_for(quote: QuoteOut, type_name: str) -> Targets:
    """K*_i and B*_i of ``type_name`` (0 and 0 for a type the quote does not price)."""
    terms = terms_for(quote, type_name)
    if terms is None:
        return Targets(0, 0)
    return Targets(terms.target_participants, terms.target_buyers)


def tie_draw(client_id: int, round_id: int) -> float:
    """A reproducible number in [0, 1) per (client, round): the same answer after a restart."""
    digest = hashlib.sha256(f"mots-tie:{client_id}:{round_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def draw_place(quote: QuoteOut, type_name: str, client_id: int) -> float:
    """The place of a client that does not know its rank: a uniform one among the targeted places
    of its type (:meth:`Targets.place_of_draw` of :func:`tie_draw`)."""
    return targets_for(quote, type_name).place_of_draw(tie_draw(client_id, quote.round_id))


def respond(facts: ClientFacts, quote: QuoteOut, utility: float, place: float) -> Choice:
    """The best response (Eq. 6) of a client with ``facts`` to ``quote``.

    ``utility`` is U(ε) at the quote's ε (the client's valuation of the announced model);
    ``place`` its place in its type's queue, which breaks ties as the published targets ask.
    """
    terms = terms_for(quote, facts.type_name)
    pay = payoffs(
        utility,
        float(quote.price),
        float(facts.cost),
        None if terms is None else float(terms.reward),
    )
    return best_response(pay, targets_for(quote, facts.type_name), place)
