"""Pricing queries: SWAN's terms for a scenario, what-if variants, and the mechanisms on offer.

For registered clients and the operator only (a client's signed token is verified here without
the market's database: :func:`mots.platform.deps.client_or_operator`); anonymous calls are 401.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, status

from mots.platform import quotes as engine
from mots.platform.api.base import MechanismPage
from mots.platform.api.pricing import PricingRequest, PricingResult, WhatIfRequest
from mots.platform.deps import PrincipalDep, app_settings
from mots.platform.metrics import PRICING_DURATION, PRICING_REQUESTS
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, decode_cursor, page_of
from services.pricing.core.config import Settings

router = APIRouter(tags=["pricing"])
SettingsDep = Annotated[Settings, Depends(app_settings)]


@router.post(
    "/v1/quote", response_model=PricingResult, responses={422: {"description": "invalid scenario"}}
)
def quote(body: PricingRequest, settings: SettingsDep, _: PrincipalDep) -> PricingResult:
    """The mechanism's price and rewards at K* (or at the given state) for a scenario."""
    start = time.perf_counter()
    try:
        sc = engine.scenario_from(body.scenario, settings.max_types)
        result = engine.price(sc, body.mechanism or settings.default_mechanism, body)
    except engine.PricingInputError as exc:
        PRICING_REQUESTS.labels("quote", "invalid").inc()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
    PRICING_REQUESTS.labels("quote", "ok").inc()
    PRICING_DURATION.labels("quote").observe(time.perf_counter() - start)
    return result


@router.post(
    "/v1/what-if", response_model=PricingResult, responses={422: {"description": "invalid query"}}
)
def what_if(body: WhatIfRequest, settings: SettingsDep, _: PrincipalDep) -> PricingResult:
    """The terms at K* under another ε_req or another cost of one type."""
    start = time.perf_counter()
    try:
        result = engine.what_if(body, settings.default_mechanism, settings.max_types)
    except engine.PricingInputError as exc:
        PRICING_REQUESTS.labels("what_if", "invalid").inc()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
    PRICING_REQUESTS.labels("what_if", "ok").inc()
    PRICING_DURATION.labels("what_if").observe(time.perf_counter() - start)
    return result


@router.get("/v1/mechanisms", response_model=MechanismPage)
def mechanisms(
    _: PrincipalDep, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> MechanismPage:
    """Names a request may give as ``mechanism``, a page at a time."""
    start = decode_cursor(cursor) or 0
    names = engine.mechanism_names()[start : start + limit + 1]
    page = page_of(list(enumerate(names, start=start + 1)), limit, key=lambda n: n[0])
    return MechanismPage(items=[name for _, name in page.items], next=page.next)
