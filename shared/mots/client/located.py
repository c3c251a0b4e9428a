"""Clients that know where their URL came from, so that an unreachable or wrong URL's error says
which URL, from where (a flag, the environment, a profile, a work folder's endpoints.json, the
market's discovery route) and what answered there (issue 40: ``unreachable: ConnectError …``
named neither the URL nor its source, and a URL of another service answered a bare 404)."""

from __future__ import annotations

from typing import Any, NoReturn

import httpx

from mots.client.config import explain_no_route
from mots.client.errors import MarketError
from mots.client.market import MarketClient
from mots.client.rounds import RoundsClient


def is_no_route(exc: MarketError) -> bool:
    """A 404 that is no refusal of the API's own (those name a field: ``round_id: …``) but the
    server's "no such route": the URL points at another service, or carries ``/v1`` twice."""
    return exc.status == 404 and exc.detail in ("Not Found", "")


def relocate(exc: MarketError, http: httpx.Client, service: str, origin: str) -> NoReturn:
    """Raise ``exc`` again (same type, status, code and request id) with what its URL's origin
    and answer say: no answer from URL (ORIGIN), or what serves the URL instead."""
    base = str(http.base_url).rstrip("/")
    if exc.status is None:
        detail = f"{exc.detail}; no answer from the {service} URL {base} ({origin})"
    elif is_no_route(exc):
        detail = explain_no_route(http, base, service, exc.path, origin)
    else:
        raise exc
    raise type(exc)(
        exc.status, detail, exc.method, exc.path, code=exc.code, request_id=exc.request_id
    ) from exc


class LocatedMarketClient(MarketClient):
    """A :class:`MarketClient` whose errors name its URL and ``origin`` (``market_url from
    profile alice``)."""

    def __init__(self, base_url: str, token: str | None = None, *, origin: str, **kw: Any):
        super().__init__(base_url, token, **kw)
        self.origin = origin
        self.service = "market"

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response | None:
        try:
            return super()._send(method, path, **kw)
        except MarketError as exc:
            relocate(exc, self._http, self.service, self.origin)


class LocatedRoundsClient(RoundsClient):
    """A :class:`RoundsClient` whose errors name its URL and ``origin``."""

    def __init__(self, base_url: str, token: str | None = None, *, origin: str, **kw: Any):
        super().__init__(base_url, token, **kw)
        self._api.close()  # replaced by one that names its URL and origin
        self._api = LocatedMarketClient(base_url, token, origin=origin, **kw)
        self._api.service = "orchestration"
