"""Buying a round's model (money-moving: takes an Idempotency-Key)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from sqlalchemy.orm import Session

from mots.platform.celery_app import send
from mots.platform.metrics import PURCHASES
from mots.platform.schemas import PurchaseIn, PurchaseOut
from mots.platform.transactions import in_transaction
from services.market.api.deps import (
    CeleryDep,
    CurrentClient,
    IdempotencyKeyHeader,
    SessionFactoryDep,
)
from services.market.decisions import all_declared
from services.market.idempotency import request_hash, run_once
from services.market.purchases import buy

router = APIRouter(tags=["purchases"])


@router.post(
    "/v1/purchases",
    status_code=201,
    response_model=PurchaseOut,
    responses={
        402: {"description": "balance below the price"},
        409: {"description": "round not collecting, already bought, or key reused"},
    },
)
def purchase(
    body: PurchaseIn,
    response: Response,
    client: CurrentClient,
    idempotency_key: IdempotencyKeyHeader,
    factory: SessionFactoryDep,
    celery: CeleryDep,
) -> Any:
    """Pay the round's price from the caller's wallet; a retried key returns the first result."""
    fingerprint = request_hash("POST", "/v1/purchases", body.model_dump(mode="json"))
    principal = f"client:{client.id}"

    def work(session: Session) -> tuple[int, dict[str, Any], bool]:
        code, result = run_once(
            session,
            principal,
            idempotency_key,
            fingerprint,
            lambda s: buy(s, client.id, body.round_id).model_dump(mode="json"),
        )
        return code, result, all_declared(session, body.round_id)

    code, result, complete = in_transaction(factory, work)
    response.status_code = code
    PURCHASES.inc()
    if complete:
        send(celery, "orchestration.decisions_complete", {"round_id": body.round_id})
    return result
