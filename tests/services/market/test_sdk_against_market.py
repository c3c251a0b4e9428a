"""The client SDK against the real market app (its database, batcher and idempotency store):
an answer lost after the market booked a purchase or a deposit is retried with the same
Idempotency-Key and booked once; the SDK's typed reads parse the real answers."""

from __future__ import annotations

from decimal import Decimal

import httpx
from fastapi.testclient import TestClient

from mots.client import MarketClient
from mots.platform.api.base import Strategy
from tests.services.market.conftest import OPERATOR


class LoseAnswers(httpx.BaseTransport):
    """Forward to the market app, but drop the first answer to each path in ``paths`` (the
    market has done the work; the caller sees a broken connection)."""

    def __init__(self, app: TestClient, paths: set[str]) -> None:
        self.app, self.paths, self.calls = app, set(paths), []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.calls.append(
            (request.method, request.url.path, request.headers.get("idempotency-key"))
        )
        answer = self.app.send(request)
        answer.read()
        if request.url.path in self.paths:
            self.paths.discard(request.url.path)
            raise httpx.ReadError("connection lost after the market answered", request=request)
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


def _sdk(market: TestClient, token: str, lossy: LoseAnswers) -> MarketClient:
    return MarketClient("http://testserver", token, transport=lossy, sleep=lambda _: None)


def test_lost_answers_are_retried_with_one_key_and_booked_once(
    market: TestClient, register, open_round
) -> None:
    """deposit and buy each lose their first answer; the retry carries the same key, the market
    replays its first result, and the wallet moves once each way."""
    buyer = register(name="b")
    token = OPERATOR["Authorization"].removeprefix("Bearer ")
    lossy = LoseAnswers(market, {"/v1/deposits", "/v1/purchases"})
    deposit = _sdk(market, token, lossy).deposit(buyer["id"], Decimal("10"))
    assert deposit.balance == Decimal("10")
    open_round(price="2.5")
    mine = _sdk(market, buyer["token"], lossy)
    bought = mine.buy(1)
    assert bought.balance == Decimal("7.5")
    posts = [(path, key) for method, path, key in lossy.calls if method == "POST"]
    assert [p for p, _ in posts] == ["/v1/deposits"] * 2 + ["/v1/purchases"] * 2
    assert posts[0][1] == posts[1][1] and posts[2][1] == posts[3][1] != posts[0][1]
    entries = mine.entries()
    assert [(e.kind, e.amount) for e in entries] == [
        ("purchase", Decimal("-2.5")),
        ("deposit", Decimal("10")),
    ]
    assert mine.balance().balance == Decimal("7.5")
    assert mine.decision(1) is not None and mine.decision(1).strategy == Strategy.BUY
    quote = mine.quote(1)
    assert quote is not None and quote.price == Decimal("2.5")
