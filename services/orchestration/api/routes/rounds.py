"""Rounds: start one (operator), read their state, figures and transitions."""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request, status

from mots.platform.api.base import MAX_ID, RoundState
from mots.platform.api.rounds import (
    RoundDetail,
    RoundOut,
    RoundQuote,
    RoundStart,
    RoundStarted,
)
from mots.platform.contracts import ORCHESTRATION_ADVANCE, AdvanceRequest, send
from mots.platform.deps import Principal, PrincipalDep, operator
from mots.platform.money import to_micros
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from mots.tasks.stored import TaskRetired, TaskSourceUnavailable
from services.orchestration.rounds.ports import RoundInFlight, RoundRecord
from services.orchestration.rounds.sql_store import SqlCallLog, SqlRoundStore
from services.orchestration.rounds.task_economics import UnknownTask, check_task

router = APIRouter(tags=["rounds"])


def _store(request: Request) -> SqlRoundStore:
    return SqlRoundStore(request.app.state.sessions)


_SHOWN = [f.name for f in fields(RoundRecord) if f.name in RoundOut.model_fields.keys() - {"quote"}]
"""The record's fields the round API shows as they are (a field added to both shows at once);
the quote is shown with its amounts as the market books them."""


def _out(rnd: RoundRecord) -> RoundOut:
    """The round as the API shows it: the record's shown fields, its quote with the amounts as
    the market books them, and ε predicted at the quote and measured by the evaluation."""
    shown: dict[str, Any] = {name: getattr(rnd, name) for name in _SHOWN}
    return RoundOut(
        **shown,
        quote=RoundQuote.of(rnd.quote) if rnd.quote else None,
        predicted_epsilon=rnd.quote.epsilon if rnd.quote else None,
        measured_epsilon=rnd.evaluation.test_loss if rnd.evaluation else None,
    )


@router.post(
    "/v1/rounds",
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[Depends(operator)],
    responses={
        404: {"description": "no task of that name (no task file, none stored at the market)"},
        409: {"description": "another round of the task is in flight, or the task is retired"},
        503: {"description": "no task file of that name, and the market could not be asked"},
    },
)
def start_round(request: Request, body: RoundStart | None = None) -> RoundStarted:
    """Open a new market round of a task (by default the deployment's default task, the one a
    call naming none acts in) pinned to the task's current version, optionally with its own
    subsidy budget and collection window (409 while another of the task is in flight)."""
    body = body or RoundStart()
    budget = body.subsidy_budget
    try:
        version = check_task(body.task, request.app.state.settings)
    except TaskRetired as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    except TaskSourceUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from exc
    except UnknownTask as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
    micros = None if budget is None else to_micros(budget)
    try:
        round_id = _store(request).create(micros, body.collect_seconds, body.task, version)
    except RoundInFlight as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    advance = AdvanceRequest(round_id=round_id, state=RoundState.OPEN)
    send(request.app.state.celery, ORCHESTRATION_ADVANCE, advance)
    return RoundStarted(round_id=round_id, state=RoundState.OPEN)


def _client_view(out: RoundOut, client_id: int) -> RoundOut:
    """A round as a client sees it: the per-type terms (quote, summary's K_i, B_i, p, r_i), which
    the market publishes to every client (its quote routes), but no type's private cost or the
    error model (``scenario``), no ledger settlement, and of the per-participant outcomes only
    the reader's own. Nothing in it is private to the round's members, so it needs no member
    list: the market owns membership (issue 25) and this service keeps none."""
    if out.summary is None:
        return out.model_copy(update={"scenario": None})
    me = str(client_id)
    summary = out.summary.model_copy(
        update={
            "settlement": None,
            "dropped": [c for c in out.summary.dropped if c == client_id],
            "failed_verification": [c for c in out.summary.failed_verification if c == client_id],
            "verification": {k: v for k, v in out.summary.verification.items() if k == me},
        }
    )
    return out.model_copy(update={"scenario": None, "summary": summary})


def _visible(rnd: RoundRecord, who: Principal) -> RoundOut:
    """The round as ``who`` may read it: whole for the operator, the client's view for any
    authenticated client."""
    if who.client_id is None:
        return _out(rnd)
    return _client_view(_out(rnd), who.client_id)


@router.get("/v1/rounds")
def list_rounds(
    request: Request, who: PrincipalDep, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[RoundOut]:
    """The rounds, newest first, a page at a time: whole for the operator, the client's view
    for a client."""
    rows = _store(request).latest(limit + 1, before=decode_cursor(cursor))
    page = page_of(rows, limit, key=lambda r: r.id)
    items = [_visible(r, who) for r in page.items]
    return Page[RoundOut](items=items, next=page.next)


@router.get(
    "/v1/rounds/{round_id}",
    responses={404: {"description": "no such round"}},
)
def get_round(
    round_id: Annotated[int, Path(ge=1, le=MAX_ID, description="the round's id")],
    request: Request,
    who: PrincipalDep,
) -> RoundDetail:
    """A round's state, figures and transitions (a client: the client's view)."""
    store = _store(request)
    rnd = store.load(round_id)
    if rnd is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist")
    view = _visible(rnd, who)
    transitions = store.transitions(round_id)
    calls = SqlCallLog(request.app.state.sessions).sent(round_id) if who.client_id is None else []
    return RoundDetail(**dict(view), transitions=transitions, calls=calls)
