"""Rounds: start one (operator), read their state, figures and transitions."""

from __future__ import annotations

import hmac
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.celery_app import send
from mots.platform.schemas import MAX_ID, RoundState
from services.orchestration.machine import RoundFailure, create_round
from services.orchestration.models import Round, Transition

router = APIRouter(tags=["rounds"])
bearer = HTTPBearer(auto_error=False, description="the operator token")


def _sessions(request: Request) -> sessionmaker[Session]:
    factory: sessionmaker[Session] = request.app.state.sessions
    return factory


def _operator(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    expected = request.app.state.settings.operator_token.get_secret_value()
    if credentials is None or not hmac.compare_digest(credentials.credentials, expected):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "Authorization: this call needs the operator token",
            headers={"WWW-Authenticate": "Bearer"},
        )


def _view(rnd: Round, transitions: list[Transition] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": rnd.id,
        "state": rnd.state,
        "mechanism": rnd.mechanism,
        "rule": rnd.rule,
        "created_at": rnd.created_at.isoformat(),
        "summary": json.loads(rnd.summary_json) if rnd.summary_json else None,
        # while training: the latest FedAvg round (its number, clients done, ε so far)
        "training_progress": (
            json.loads(rnd.training_progress_json) if rnd.training_progress_json else None
        ),
        "quote": json.loads(rnd.quote_json) if rnd.quote_json else None,
        # the priced population and error model: the body of a pricing what-if query
        "scenario": json.loads(rnd.scenario_json) if rnd.scenario_json else None,
    }
    if transitions is not None:
        out["transitions"] = [
            {
                "from": t.from_state,
                "to": t.to_state,
                "seconds_in_from": t.seconds_in_from,
                "note": t.note,
                "at": t.at.isoformat(),
            }
            for t in transitions
        ]
    return out


@router.post("/v1/rounds", status_code=status.HTTP_202_ACCEPTED, dependencies=[Depends(_operator)])
def start_round(request: Request) -> dict[str, Any]:
    """Open a new market round (409 while another is in flight)."""
    try:
        round_id = create_round(_sessions(request))
    except RoundFailure as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    send(
        request.app.state.celery,
        "orchestration.advance",
        {"round_id": round_id, "state": RoundState.OPEN.value},
    )
    return {"round_id": round_id, "state": RoundState.OPEN.value}


@router.get("/v1/rounds")
def list_rounds(request: Request) -> list[dict[str, Any]]:
    """Every round, newest first."""
    with _sessions(request)() as session:
        return [_view(r) for r in session.query(Round).order_by(Round.id.desc()).limit(100)]


@router.get("/v1/rounds/{round_id}")
def get_round(
    round_id: Annotated[int, Path(ge=1, le=MAX_ID, description="the round's id")], request: Request
) -> dict[str, Any]:
    """A round's state, figures and transitions."""
    with _sessions(request)() as session:
        rnd = session.get(Round, round_id)
        if rnd is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist"
            )
        transitions = (
            session.query(Transition)
            .filter(Transition.round_id == round_id)
            .order_by(Transition.id)
            .all()
        )
        return _view(rnd, transitions)
