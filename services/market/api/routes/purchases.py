"""Buying a round's model (money-moving: takes an Idempotency-Key)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy import select

from mots.platform.api.market import PurchaseIn, PurchaseOut, PurchaseRecord
from mots.platform.money import from_micros
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from services.market.api.deps import (
    BEARER_SECURITY,
    CallerDep,
    IdempotencyKeyHeader,
    ReadingClient,
    SessionFactoryDep,
)
from services.market.booking import PurchaseBatcher
from services.market.idempotency import request_hash
from services.market.models import Purchase
from services.market.purchases import PATH, PurchaseRequest

router = APIRouter(tags=["purchases"])


@router.post(
    PATH,
    status_code=201,
    response_model=PurchaseOut,
    responses={
        402: {"description": "balance below the price"},
        404: {"description": "no such round"},
        409: {
            "description": "round neither collecting nor published (or its model is gone),"
            " already bought, trained by the caller (a published round), or key reused"
        },
    },
    openapi_extra=BEARER_SECURITY,
)
async def purchase(
    request: Request, body: PurchaseIn, caller: CallerDep, idempotency_key: IdempotencyKeyHeader
) -> Any:
    """Pay the round's price from the caller's wallet; a retried key returns the first result.

    While the round collects this is a purchase in its game (a buy decision); once it is
    published, a late sale at the same price p*, booked to the platform's subsidy account
    (``late`` in the answer; docs/mechanisms.md §7.3).

    Booked together with the other purchases in flight (one database transaction per batch,
    which also checks the callers' tokens).
    """
    purchases: PurchaseBatcher = request.app.state.purchases
    fingerprint = request_hash("POST", PATH, body.model_dump(mode="json"))
    code, result = await purchases.submit(
        PurchaseRequest(
            caller.client_id, body.round_id, idempotency_key, fingerprint, caller.verifier
        )
    )
    # The body is PurchaseOut's JSON already (made and stored in the batch): sent as it is, not
    # validated and encoded again through the response model (which only documents it here).
    return Response(json.dumps(result), status_code=code, media_type="application/json")


@router.get("/v1/me/purchases", response_model=Page[PurchaseRecord])
def my_purchases(
    client: ReadingClient,
    factory: SessionFactoryDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> Page[PurchaseRecord]:
    """The caller's purchases, newest first, a page at a time."""
    query = select(Purchase).where(Purchase.client_id == client.id)
    before = decode_cursor(cursor)
    if before is not None:
        query = query.where(Purchase.id < before)
    with factory() as session:
        rows = [
            PurchaseRecord(
                purchase_id=p.id,
                round_id=p.round_id,
                price=from_micros(p.price_micros),
                transaction_id=p.transaction_id,
                refunded=p.refunded,
            )
            for p in session.scalars(query.order_by(Purchase.id.desc()).limit(limit + 1))
        ]
    return page_of(rows, limit, key=lambda r: r.purchase_id)
