"""Strategy declarations (join, buy, abstain) for a round that is collecting decisions."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from mots.platform.schemas import Strategy
from services.market.errors import Conflict
from services.market.models import Client, Decision, MarketRound, Purchase


def record_decision(
    session: Session,
    rnd: MarketRound,
    client_id: int,
    strategy: Strategy,
    from_purchase: bool = False,
) -> Decision:
    """Insert or change a client's strategy; a paid buyer cannot switch away from buying.

    Raises :class:`~services.market.errors.Conflict` when the round is not collecting or a paid
    buyer tries to switch.
    """
    if rnd.state != "collecting":
        raise Conflict(
            "round_id", f"round {rnd.id} is {rnd.state}; decisions are taken while it is collecting"
        )
    if strategy != Strategy.BUY and not from_purchase:
        paid = session.scalar(
            select(Purchase.id).where(
                Purchase.round_id == rnd.id,
                Purchase.client_id == client_id,
                Purchase.refunded.is_(False),
            )
        )
        if paid is not None:
            raise Conflict(
                "strategy", "this client paid for the round's model; a purchase is final"
            )
    decision = session.scalar(
        select(Decision).where(Decision.round_id == rnd.id, Decision.client_id == client_id)
    )
    if decision is None:
        decision = Decision(round_id=rnd.id, client_id=client_id, strategy=strategy.value)
        session.add(decision)
    else:
        decision.strategy = strategy.value
        decision.updated_at = datetime.now(UTC)
    session.flush()
    return decision


_ALL_DECLARED = select(
    (select(func.count()).select_from(Client).scalar_subquery() > 0)
    & (
        select(func.count())
        .select_from(Decision)
        .where(Decision.round_id == bindparam("round_id"))
        .scalar_subquery()
        >= select(func.count()).select_from(Client).scalar_subquery()
    )
)


def all_declared(session: Session, round_id: int) -> bool:
    """Whether every registered client has a decision in the round (one prebuilt query)."""
    return bool(session.connection().execute(_ALL_DECLARED, {"round_id": round_id}).scalar())
