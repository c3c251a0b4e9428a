"""The published quote of the current (or a given) round: price, rewards and targets per type."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.api.base import RoundState
from mots.platform.api.market import QuoteOut, TypeQuote
from mots.platform.api.sales import NOT_SCHEDULED, OnSale
from mots.platform.money import from_micros
from mots.platform.problems import problem, problems
from services.market.api.deps import CurrentClient, RoundId, SessionFactoryDep
from services.market.models import MarketRound
from services.market.rounds import stored_quote

router = APIRouter(tags=["quotes"])


ON_SALE_SHOWN = 20
"""The most published rounds a quote lists as on sale (newest first)."""

_SELLING = (RoundState.COLLECTING, RoundState.PUBLISHED)


def _on_sale(session: Session) -> list[OnSale]:
    """The models on sale now, newest first: a collecting round (bought at its quote) and the
    published ones (late sales at the round's price p*; docs/mechanisms.md §7.3)."""
    rows = session.scalars(
        select(MarketRound)
        .where(MarketRound.state.in_([s.value for s in _SELLING]))
        .order_by(MarketRound.id.desc())
        .limit(ON_SALE_SHOWN + 1)
    )
    return [
        OnSale(
            round_id=r.id,
            state=RoundState(r.state),
            price=from_micros(r.price_micros),
            late=r.state == RoundState.PUBLISHED,
        )
        for r in rows
        # a published model whose file retention removed is not on sale (nor bought: 409)
        if r.state != RoundState.PUBLISHED or (r.artifact_path and Path(r.artifact_path).is_file())
    ][:ON_SALE_SHOWN]


def _next_round(session: Session) -> str:
    """When the next round opens: one is open now (taking decisions), or none is scheduled."""
    taking = session.scalar(
        select(MarketRound)
        .where(MarketRound.state.in_([RoundState.OPEN.value, RoundState.COLLECTING.value]))
        .order_by(MarketRound.id.desc())
        .limit(1)
    )
    if taking is None:
        return NOT_SCHEDULED
    return f"round {taking.id} is open now ({taking.state})"


def _quote(session: Session, rnd: MarketRound) -> QuoteOut:
    q = stored_quote(rnd)
    return QuoteOut(
        round_id=rnd.id,
        state=RoundState(rnd.state),
        mechanism=q.mechanism,
        price=q.price,
        types=[
            TypeQuote(
                type_name=t,
                reward=r,
                target_participants=q.target_participants.get(t, 0),
                target_buyers=q.target_buyers.get(t, 0),
            )
            for t, r in q.rewards.items()
        ],
        epsilon=q.epsilon,
        welfare=q.welfare,
        incentive_cost=q.incentive_cost,
        collect_deadline=q.collect_deadline,
        on_sale=_on_sale(session),
        next_round=_next_round(session),
    )


@router.get(
    "/v1/quote", response_model=QuoteOut, responses=problem(404, "no round has been opened yet")
)
def current_quote(client: CurrentClient, factory: SessionFactoryDep) -> QuoteOut:
    """The latest round's quote of the caller's task, what is on sale now and when the next
    round opens (404 before its first round opens)."""
    with factory() as session:
        rnd = session.scalar(
            select(MarketRound)
            .where(MarketRound.task == client.task)
            .order_by(MarketRound.id.desc())
            .limit(1)
        )
        if rnd is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no round has been opened yet")
        return _quote(session, rnd)


@router.get("/v1/rounds/{round_id}/quote", response_model=QuoteOut, responses=problems(404))
def round_quote(round_id: RoundId, _: CurrentClient, factory: SessionFactoryDep) -> QuoteOut:
    """A given round's quote."""
    with factory() as session:
        rnd = session.get(MarketRound, round_id)
        if rnd is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist"
            )
        return _quote(session, rnd)
