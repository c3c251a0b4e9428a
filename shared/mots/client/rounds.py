"""The orchestration's round API as Python calls: open a round (operator), list, show, watch.

Rides on :class:`~mots.client.market.MarketClient`'s plumbing (one ``httpx`` pool, bearer token,
bounded retries of idempotent calls, problem+json details in the error). Bodies are the service's
own models (:mod:`mots.platform.api.rounds`): a round is a
:class:`~mots.platform.api.rounds.RoundDetail` (with its transitions) or, in a list, a
:class:`~mots.platform.api.rounds.RoundOut`. Answers are read with ``extra="ignore"``, so a newer
service with more fields still parses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from mots.client.errors import MarketError
from mots.client.market import MarketClient
from mots.platform.api.rounds import RoundDetail, RoundOut, RoundStart, RoundStarted

DEFAULT_LIST_LIMIT = 20
V = TypeVar("V", bound=BaseModel)


class OrchestrationError(MarketError):
    """The orchestration refused a call, answered something unreadable, or was unreachable."""

    service = "orchestration"


_LIST: TypeAdapter[list[RoundOut]] = TypeAdapter(list[RoundOut])


class RoundsClient:
    """A client of the orchestration API (``http://host:8003``); ``token`` as for the market
    (the operator's opens rounds). Keyword arguments go to :class:`MarketClient`."""

    def __init__(self, base_url: str, token: str | None = None, **kw: Any) -> None:
        self._api = MarketClient(base_url, token, **kw)
        self._sleep: Callable[[float], None] = kw.get("sleep", time.sleep)

    def close(self) -> None:
        """Close the connection pool."""
        self._api.close()

    def __enter__(self) -> RoundsClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _get(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = self._api._send(method, path, **kw)
        except MarketError as exc:
            raise OrchestrationError(
                exc.status,
                exc.detail,
                exc.method,
                exc.path,
                code=exc.code,
                request_id=exc.request_id,
            ) from exc
        return None if r is None else r.content

    def open_round(
        self,
        subsidy_budget: Decimal | None = None,
        collect_seconds: float | None = None,
        task: str | None = None,
    ) -> RoundStarted:
        """``POST /v1/rounds`` (operator): open a market round of ``task`` (default
        fashion-mnist; 409 while another round of that task is in flight, 404 for a task the
        platform has no file of), with its own cap on the subsidy (else the task's
        ``subsidy_budget``; fashion-mnist: ``MOTS_ROUND_SUBSIDY_BUDGET``) and its own collection
        window in seconds (else the task's; fashion-mnist: ``MOTS_COLLECT_TIMEOUT_S``; the
        service refuses one outside its bounds, 422 naming ``body.collect_seconds``).

        Not retried: a lost answer may have opened it; :meth:`rounds` shows the newest."""
        given: dict[str, Any] = {
            "subsidy_budget": subsidy_budget,
            "collect_seconds": collect_seconds,
            "task": task,
        }
        # not validated here: the service refuses a bad value (4xx naming the field)
        fields = {k: v for k, v in given.items() if v is not None}
        body = RoundStart.model_construct(**fields) if fields else None
        content = self._get("POST", "/v1/rounds", body=body, retry=False)
        return self._parse(RoundStarted, content, "POST", "/v1/rounds")

    def round(self, round_id: int) -> RoundDetail | None:
        """``GET /v1/rounds/{id}``: the round with its transitions; None when there is none."""
        path = f"/v1/rounds/{round_id}"
        content = self._get("GET", path, ok_missing=True)
        return None if content is None else self._parse(RoundDetail, content, "GET", path)

    def require_round(self, round_id: int) -> RoundDetail:
        """``GET /v1/rounds/{id}``: the round with its transitions; a missing one is the
        service's own 404 (:class:`OrchestrationError` with its code and request id)."""
        path = f"/v1/rounds/{round_id}"
        return self._parse(RoundDetail, self._get("GET", path), "GET", path)

    def rounds(self, limit: int = DEFAULT_LIST_LIMIT) -> list[RoundOut]:
        """``GET /v1/rounds``: up to ``limit`` rounds, newest first (following ``next`` pages
        where the service pages its answer)."""
        if limit < 1:
            raise ValueError(f"limit: must be ≥ 1, got {limit}")
        out: list[RoundOut] = []
        params: dict[str, Any] = {"limit": limit}
        while len(out) < limit:
            content = self._get("GET", "/v1/rounds", params=params)
            page, cursor = _page(content)
            out.extend(page)
            if not cursor or not page:
                break
            params = {"limit": limit - len(out), "cursor": cursor}
        return out[:limit]

    def watch(
        self, round_id: int, *, poll_s: float = 0.5, timeout_s: float | None = None
    ) -> Iterator[RoundDetail]:
        """Yield the round each time its state or FedAvg progress changes, ending with it
        published or settled by rule. Raises TimeoutError after ``timeout_s`` (None: never)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        last: tuple[Any, ...] | None = None
        while True:
            view = self.require_round(round_id)
            p = view.training_progress
            seen = (
                view.state,
                None if p is None else (p.fedavg_round, p.clients_done, p.in_progress),
            )
            if seen != last:
                last = seen
                yield view
            if view.finished:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"round {round_id}: not finished within {timeout_s}s ({view.state.value})"
                )
            self._sleep(poll_s)

    @staticmethod
    def _parse(model: type[V], content: bytes, method: str, path: str) -> V:
        try:
            return model.model_validate_json(content, extra="ignore")
        except ValidationError as exc:
            raise OrchestrationError(None, f"unexpected answer: {exc}", method, path) from exc


def _page(content: bytes) -> tuple[list[RoundOut], str | None]:
    """A list answer, plain (``[…]``) or paged (``{"items": […], "next": cursor}``)."""
    try:
        if content.lstrip().startswith(b"{"):
            body = TypeAdapter(dict[str, Any]).validate_json(content)
            items = _LIST.validate_python(body.get("items", []), extra="ignore")
            nxt = body.get("next")
            return items, str(nxt) if nxt else None
        return _LIST.validate_json(content, extra="ignore"), None
    except ValidationError as exc:
        raise OrchestrationError(None, f"unexpected answer: {exc}", "GET", "/v1/rounds") from exc
