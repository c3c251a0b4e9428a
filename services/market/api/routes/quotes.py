"""The published quote of the current (or a given) round: price, rewards and targets per type."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from sqlalchemy import select

from mots.platform.api.base import RoundState
from mots.platform.api.market import QuoteOut, TypeQuote
from mots.platform.problems import problem, problems
from services.market.api.deps import CurrentClient, RoundId, SessionFactoryDep
from services.market.models import MarketRound
from services.market.rounds import stored_quote

router = APIRouter(tags=["quotes"])


def _quote(rnd: MarketRound) -> QuoteOut:
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
    )


@router.get(
    "/v1/quote", response_model=QuoteOut, responses=problem(404, "no round has been opened yet")
)
def current_quote(_: CurrentClient, factory: SessionFactoryDep) -> QuoteOut:
    """The latest round's quote (404 before the first round opens)."""
    with factory() as session:
        rnd = session.scalar(select(MarketRound).order_by(MarketRound.id.desc()).limit(1))
        if rnd is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no round has been opened yet")
        return _quote(rnd)


@router.get("/v1/rounds/{round_id}/quote", response_model=QuoteOut, responses=problems(404))
def round_quote(round_id: RoundId, _: CurrentClient, factory: SessionFactoryDep) -> QuoteOut:
    """A given round's quote."""
    with factory() as session:
        rnd = session.get(MarketRound, round_id)
        if rnd is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist"
            )
        return _quote(rnd)
