"""The quote in words: when its collection closes, what is on sale now and when the next round
opens (``mots market quote``; the late sales of issue 40, docs/mechanisms.md §7.3)."""

from __future__ import annotations

from datetime import UTC, datetime

from mots.cli.client import from_now, money
from mots.platform.api.market import QuoteOut


def on_sale_lines(q: QuoteOut) -> str:
    """What is on sale now and when the next round opens, in words (after the quote's table)."""
    sale = [
        f"round {s.round_id} at {money(s.price)} ("
        + ("published, a late sale" if s.late else s.state.value)
        + ")"
        for s in q.on_sale
    ]
    return (
        "\non sale now (`mots market buy N`): "
        + ("; ".join(sale) if sale else "nothing")
        + f"\nnext round: {q.next_round}"
    )


def when(at: object) -> str:
    """The collection deadline in words: when it closes (``in N s``) or that it has closed."""
    if not isinstance(at, datetime):
        return f"collection closes {at}"
    left = (at - datetime.now(UTC)).total_seconds()
    stamp = f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({from_now(left)})"
    return f"collection closes {stamp}" if left >= 0 else f"collection closed {stamp}"
