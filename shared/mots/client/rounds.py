"""The orchestration's round API as Python calls: open a round (operator), list, show, watch.

Rides on :class:`~mots.client.market.MarketClient`'s plumbing (one ``httpx`` pool, bearer token,
bounded retries of idempotent calls, problem+json details in the error). The answers are read
into :class:`RoundView`, the client's view of the service's ``RoundOut``/``RoundDetail``: the
fields a user watches are typed, the rest of the body (summary, quote, scenario) is kept as the
service sent it, so a newer service with more fields still parses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from mots.client.market import MarketClient, MarketError
from mots.platform.api.base import TERMINAL_STATES, RoundState
from mots.platform.money import Money
from mots.platform.timestamps import Timestamp

DEFAULT_LIST_LIMIT = 20
V = TypeVar("V", bound=BaseModel)


class OrchestrationError(MarketError):
    """The orchestration refused a call, answered something unreadable, or was unreachable."""

    def __init__(
        self,
        status: int | None,
        detail: str,
        method: str = "",
        path: str = "",
        *,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(status, detail, method, path, code=code, request_id=request_id)
        where = f"{method} {path}: " if method else ""
        answer = f"orchestration answered {status}" if status is not None else "unreachable"
        self.args = (f"{where}{answer}: {detail}",)


class _View(BaseModel):
    model_config = ConfigDict(extra="allow")


class FedAvgProgress(_View):
    """The latest FedAvg round of a training under way (the service's ``training_progress``)."""

    fedavg_round: int = Field(..., description="1-based number of the FedAvg round")
    fedavg_rounds: int
    clients_done: int
    clients: int
    epsilon: float | None = None
    round_seconds: float = 0.0
    in_progress: bool = False


class RoundView(_View):
    """A market round as the orchestration shows it: state, FedAvg progress, figures."""

    id: int
    state: RoundState
    mechanism: str | None = None
    rule: str | None = None
    created_at: Timestamp | None = None
    training_progress: FedAvgProgress | None = None
    summary: dict[str, Any] | None = None
    quote: dict[str, Any] | None = None
    transitions: list[dict[str, Any]] = Field(default_factory=list)
    deadlines: dict[str, Timestamp] | None = Field(
        None, description="when each state the round entered must be left by (RFC 3339, UTC)"
    )

    def deadline(self) -> float | None:
        """The epoch second by which the round must leave its current state (None: none known,
        or the round has ended)."""
        if self.finished or not self.deadlines:
            return None
        due = self.deadlines.get(self.state.value)
        return None if due is None else due.timestamp()

    @property
    def finished(self) -> bool:
        """True once the round is published or settled by rule (nothing more will change)."""
        return self.state in TERMINAL_STATES


class RoundOpened(_View):
    """``POST /v1/rounds``'s answer: the new round's id; it opens once the worker runs."""

    round_id: int
    state: RoundState


class RoundOptions(BaseModel):
    """The body of ``POST /v1/rounds`` (the orchestration's ``RoundStart``)."""

    model_config = ConfigDict(extra="forbid")

    subsidy_budget: Money | None = Field(None, description="most this round may subsidise")
    collect_seconds: float | None = Field(
        None,
        allow_inf_nan=False,
        description="how long the round takes decisions (the service bounds it)",
    )


_LIST: TypeAdapter[list[RoundView]] = TypeAdapter(list[RoundView])


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
        self, subsidy_budget: Decimal | None = None, collect_seconds: float | None = None
    ) -> RoundOpened:
        """``POST /v1/rounds`` (operator): open a market round (409 while another is in flight),
        with its own cap on the subsidy (else the platform's ``MOTS_ROUND_SUBSIDY_BUDGET``) and
        its own collection window in seconds (else ``MOTS_COLLECT_TIMEOUT_S``; the service
        refuses one outside its bounds, 422 naming ``body.collect_seconds``).

        Not retried: a lost answer may have opened it; :meth:`rounds` shows the newest."""
        body = (
            None
            if subsidy_budget is None and collect_seconds is None
            else RoundOptions(subsidy_budget=subsidy_budget, collect_seconds=collect_seconds)
        )
        content = self._get("POST", "/v1/rounds", body=body, retry=False)
        return self._parse(RoundOpened, content, "POST", "/v1/rounds")

    def round(self, round_id: int) -> RoundView | None:
        """``GET /v1/rounds/{id}``: the round with its transitions; None when there is none."""
        path = f"/v1/rounds/{round_id}"
        content = self._get("GET", path, ok_missing=True)
        return None if content is None else self._parse(RoundView, content, "GET", path)

    def rounds(self, limit: int = DEFAULT_LIST_LIMIT) -> list[RoundView]:
        """``GET /v1/rounds``: up to ``limit`` rounds, newest first (following ``next`` pages
        where the service pages its answer)."""
        if limit < 1:
            raise ValueError(f"limit: must be ≥ 1, got {limit}")
        out: list[RoundView] = []
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
    ) -> Iterator[RoundView]:
        """Yield the round each time its state or FedAvg progress changes, ending with it
        published or settled by rule. Raises TimeoutError after ``timeout_s`` (None: never)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        last: tuple[Any, ...] | None = None
        while True:
            view = self.round(round_id)
            if view is None:
                raise OrchestrationError(404, f"round_id: round {round_id} does not exist")
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
            return model.model_validate_json(content)
        except ValidationError as exc:
            raise OrchestrationError(None, f"unexpected answer: {exc}", method, path) from exc


def _page(content: bytes) -> tuple[list[RoundView], str | None]:
    """A list answer, plain (``[…]``) or paged (``{"items": […], "next": cursor}``)."""
    try:
        if content.lstrip().startswith(b"{"):
            body = TypeAdapter(dict[str, Any]).validate_json(content)
            items = _LIST.validate_python(body.get("items", []))
            nxt = body.get("next")
            return items, str(nxt) if nxt else None
        return _LIST.validate_json(content), None
    except ValidationError as exc:
        raise OrchestrationError(None, f"unexpected answer: {exc}", "GET", "/v1/rounds") from exc
