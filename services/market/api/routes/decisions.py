"""Declaring a strategy (join, buy, abstain) in the round that is collecting decisions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response, status
from sqlalchemy import select

from mots.platform.api.market import DecisionIn, DecisionOut
from mots.platform.problems import problem, problems
from services.market.api.deps import (
    BEARER_SECURITY,
    CallerDep,
    CurrentClient,
    RoundId,
    SessionFactoryDep,
)
from services.market.booking import DecisionBatcher
from services.market.decisions import Declaration
from services.market.models import Decision, Purchase

router = APIRouter(tags=["decisions"])


@router.put(
    "/v1/rounds/{round_id}/decision",
    response_model=DecisionOut,
    responses=problems(404)
    | problem(409, "the round is not collecting, or a paid buyer changes")
    | problem(403, "a pending client, or one not in the round's population (joined later)"),
    openapi_extra=BEARER_SECURITY,
)
async def declare(request: Request, round_id: RoundId, body: DecisionIn, caller: CallerDep) -> Any:
    """Declare (or change) the caller's strategy; declaring buy still requires a purchase.

    Booked together with the other declarations in flight (one transaction per batch, which also
    checks the callers' tokens); once every client has declared, the orchestration hears of it
    (no polling of the population).
    """
    batcher: DecisionBatcher = request.app.state.declarations
    out = await batcher.submit(
        Declaration(caller.client_id or 0, round_id, body.strategy, caller.verifier)
    )
    # Made and checked in the batch: sent as it is, not validated again by the response model.
    return Response(out.model_dump_json(), media_type="application/json")


@router.get(
    "/v1/rounds/{round_id}/decision",
    response_model=DecisionOut,
    responses=problem(404, "no such round, or no decision of the caller in it"),
)
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
