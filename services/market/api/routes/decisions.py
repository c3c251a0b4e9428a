"""Declaring a strategy (join, buy, abstain) in the round that is collecting decisions."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.contracts import ORCHESTRATION_DECISIONS_COMPLETE, send
from mots.platform.schemas import DecisionIn, DecisionOut, RoundRef
from mots.platform.transactions import in_transaction
from services.market.api.deps import CeleryDep, CurrentClient, RoundId, SessionFactoryDep
from services.market.decisions import all_declared, record_decision
from services.market.models import Decision, MarketRound, Purchase

router = APIRouter(tags=["decisions"])


@router.put("/v1/rounds/{round_id}/decision", response_model=DecisionOut)
def declare(
    round_id: RoundId,
    body: DecisionIn,
    client: CurrentClient,
    factory: SessionFactoryDep,
    celery: CeleryDep,
) -> DecisionOut:
    """Declare (or change) the caller's strategy; declaring buy still requires a purchase."""

    def work(session: Session) -> tuple[DecisionOut, bool]:
        rnd = session.get(MarketRound, round_id, with_for_update={"read": True})
        if rnd is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist"
            )
        decision = record_decision(session, rnd, client.id, body.strategy)
        paid = session.scalar(
            select(Purchase.id).where(
                Purchase.round_id == round_id, Purchase.client_id == client.id
            )
        )
        out = DecisionOut(
            round_id=round_id, client_id=client.id, strategy=body.strategy, paid=paid is not None
        )
        return out, decision is not None and all_declared(session, round_id)

    out, complete = in_transaction(factory, work)
    if complete:  # tell the orchestrator at once instead of letting it poll
        send(celery, ORCHESTRATION_DECISIONS_COMPLETE, RoundRef(round_id=round_id))
    return out


@router.get("/v1/rounds/{round_id}/decision", response_model=DecisionOut)
def my_decision(
    round_id: RoundId, client: CurrentClient, factory: SessionFactoryDep
) -> DecisionOut:
    """The caller's recorded strategy in a round."""
    with factory() as session:
        d = session.scalar(
            select(Decision).where(Decision.round_id == round_id, Decision.client_id == client.id)
        )
        if d is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"round_id: no decision of yours in round {round_id}"
            )
        paid = session.scalar(
            select(Purchase.id).where(
                Purchase.round_id == round_id, Purchase.client_id == client.id
            )
        )
        return DecisionOut(
            round_id=round_id, client_id=client.id, strategy=d.strategy, paid=paid is not None
        )
