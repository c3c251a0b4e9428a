"""The market's REST API as the agent uses it: register, read the quote, declare, buy.

Errors carry the market's own ``detail`` (it names the field and the rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from edge.agent.best_response import ClientFacts, PublishedQuote
from mots.platform.schemas import Strategy


class MarketError(RuntimeError):
    """The market refused a call; ``status`` is the HTTP status, the message its detail."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"market answered {status}: {detail}")
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Registration:
    """This device's identity at the market: its client id and bearer token."""

    client_id: int
    token: str


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    raise MarketError(response.status_code, str(detail))


class MarketClient:
    """A thin client of the market API over one ``httpx.Client``."""

    def __init__(self, base_url: str, timeout_s: float = 10.0, transport: Any = None) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> MarketClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def register(self, name: str, facts: ClientFacts) -> Registration:
        """``POST /v1/clients``: declare the type, D_i and C_i; the token is shown only once."""
        r = self._http.post(
            "/v1/clients",
            json={
                "name": name,
                "type_name": facts.type_name,
                "data_size": facts.data_size,
                "cost": str(facts.cost),
            },
        )
        _raise_for(r)
        body = r.json()
        return Registration(client_id=int(body["id"]), token=str(body["token"]))

    def me(self, token: str) -> dict[str, Any]:
        """``GET /v1/me``: the registered facts behind ``token``."""
        r = self._http.get("/v1/me", headers=_auth(token))
        _raise_for(r)
        out: dict[str, Any] = r.json()
        return out

    def quote(self, token: str) -> PublishedQuote | None:
        """``GET /v1/quote``: the latest round's quote, or None before the first round."""
        r = self._http.get("/v1/quote", headers=_auth(token))
        if r.status_code == 404:
            return None
        _raise_for(r)
        return PublishedQuote.from_json(r.json())

    def declared(self, token: str, round_id: int) -> Strategy | None:
        """``GET /v1/rounds/{id}/decision``: the strategy already declared, or None."""
        r = self._http.get(f"/v1/rounds/{round_id}/decision", headers=_auth(token))
        if r.status_code == 404:
            return None
        _raise_for(r)
        return Strategy(r.json()["strategy"])

    def declare(self, token: str, round_id: int, strategy: Strategy) -> None:
        """``PUT /v1/rounds/{id}/decision``: declare join, buy or abstain."""
        r = self._http.put(
            f"/v1/rounds/{round_id}/decision",
            json={"strategy": strategy.value},
            headers=_auth(token),
        )
        _raise_for(r)

    def buy(self, token: str, registration: Registration, round_id: int) -> dict[str, Any]:
        """``POST /v1/purchases`` with an idempotency key per (client, round): safe to retry."""
        key = f"edge-agent-{registration.client_id}-round-{round_id}"
        r = self._http.post(
            "/v1/purchases",
            json={"round_id": round_id},
            headers={**_auth(token), "Idempotency-Key": key},
        )
        _raise_for(r)
        out: dict[str, Any] = r.json()
        return out


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
