"""What a client may buy now (issue 40, late sales): the quote's ``on_sale`` entries and its
``next_round`` words when no round is open (docs/mechanisms.md §7.3)."""

from __future__ import annotations

from pydantic import Field

from mots.platform.api.base import RoundState, Schema, example
from mots.platform.money import Money

ON_SALE_EXAMPLE = {"round_id": 2, "state": "published", "price": "0.700000", "late": True}
ON_SALE_DESCRIPTION = (
    "what may be bought now, newest first: the collecting round, then published rounds (late"
    " sales at their round's price; the 20 newest)"
)
NEXT_ROUND_DESCRIPTION = (
    "when the next round opens: open now, or not scheduled (the operator opens rounds; the market"
    " keeps no schedule)"
)
LATE_PURCHASE_DESCRIPTION = (
    "bought after the round published (a late sale at the round's price p*, booked to the"
    " platform's subsidy account; docs/mechanisms.md §7.3)"
)


class OnSale(Schema):
    """A model a client may buy now: the collecting round's (at its quote, declaring ``buy``) or
    a published round's (a late sale at the round's price p*; docs/mechanisms.md §7.3)."""

    model_config = example({"round_id": 2, "state": "published", "price": "0.750000", "late": True})

    round_id: int
    state: RoundState
    price: Money
    late: bool = Field(..., description="true: sold after its round, not part of its game")


NOT_SCHEDULED = "not scheduled: the operator opens rounds (`mots rounds open`)"
"""The quote's ``next_round`` when no round is open: rounds open when the operator opens them."""
