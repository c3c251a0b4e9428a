"""Downloading a published round's model, for its participants and its paying buyers only."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import FileResponse
from sqlalchemy import select

from services.market.api.deps import CurrentClient, RoundId, SessionFactoryDep, SettingsDep
from services.market.models import Decision, MarketRound, Purchase

router = APIRouter(tags=["models"])


@router.get(
    "/v1/rounds/{round_id}/model",
    response_class=FileResponse,
    responses={403: {"description": "not entitled"}, 409: {"description": "not published yet"}},
)
def download(
    round_id: RoundId, client: CurrentClient, factory: SessionFactoryDep, settings: SettingsDep
) -> FileResponse:
    """The round's model artifact, if the caller trained it (and did not drop out) or bought it."""
    with factory() as session:
        rnd = session.get(MarketRound, round_id)
        if rnd is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist"
            )
        if rnd.state != "published" or not rnd.artifact_path:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                f"round_id: round {round_id} is {rnd.state}, not published",
            )
        joined = session.scalar(
            select(Decision.id).where(
                Decision.round_id == round_id,
                Decision.client_id == client.id,
                Decision.strategy == "join",
                Decision.dropped.is_(False),
            )
        )
        bought = session.scalar(
            select(Purchase.id).where(
                Purchase.round_id == round_id,
                Purchase.client_id == client.id,
                Purchase.refunded.is_(False),
            )
        )
        if joined is None and bought is None:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"round_id: client {client.id} neither trained nor bought round {round_id}'s model",
            )
        path = Path(rnd.artifact_path).resolve()
        root = Path(settings.artifact_root).resolve()
        if not path.is_file() or not path.is_relative_to(root):
            raise HTTPException(status.HTTP_410_GONE, "the model artifact is no longer available")
        return FileResponse(
            path,
            media_type="application/octet-stream",
            filename=f"mots-round-{round_id}{path.suffix}",
            headers={"X-Model-SHA256": rnd.artifact_sha256 or ""},
        )
