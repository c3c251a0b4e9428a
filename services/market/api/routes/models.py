"""Downloading a published round's model, for its participants and its paying buyers only."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import FileResponse
from sqlalchemy import select

from mots.platform import model_signing
from mots.platform.api.base import RoundState
from mots.platform.api.market import ModelInfo, ModelKey
from mots.platform.money import from_micros, money_str
from services.market.api.deps import ReadingClient, RoundId, SessionFactoryDep, SettingsDep
from services.market.models import Client, Decision, MarketRound, Purchase
from services.market.signing import signing_key

router = APIRouter(tags=["models"])


def _entitled_artifact(
    round_id: int, client: Client, factory: SessionFactoryDep, settings: SettingsDep
) -> tuple[Path, str, Decimal]:
    """The published artifact's path, SHA-256 and the round's price, if ``client`` trained it (and did not drop
    out) or bought it, in its own task; else the refusal (404, 409, 403, 410)."""
    client_id = client.id
    with factory() as session:
        rnd = session.get(MarketRound, round_id)
        if rnd is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist"
            )
        if rnd.state != RoundState.PUBLISHED or not rnd.artifact_path:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                f"round_id: round {round_id} is {rnd.state}, not published",
            )
        joined = session.scalar(
            select(Decision.id).where(
                Decision.round_id == round_id,
                Decision.client_id == client_id,
                Decision.strategy == "join",
                Decision.dropped.is_(False),
            )
        )
        bought = session.scalar(
            select(Purchase.id).where(
                Purchase.round_id == round_id,
                Purchase.client_id == client_id,
                Purchase.refunded.is_(False),
            )
        )
        if joined is None and bought is None:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"round_id: client {client_id} neither trained nor bought round {round_id}'s model",
            )
        path = Path(rnd.artifact_path).resolve()
        root = Path(settings.artifact_dir).resolve()
        if not path.is_file() or not path.is_relative_to(root):
            raise HTTPException(status.HTTP_410_GONE, "the model artifact is no longer available")
        return path, rnd.artifact_sha256 or "", from_micros(rnd.price_micros)


ENTITLEMENT_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "no such round"},
    403: {"description": "not entitled: the caller neither trained nor bought the model"},
    409: {"description": "not published yet"},
    410: {"description": "the artifact is gone"},
}


@router.get(
    "/v1/rounds/{round_id}/model",
    response_class=FileResponse,
    responses={
        200: {
            "description": "the model file (mots-round-N.pt2); X-Model-SHA256 is its digest",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        },
        **ENTITLEMENT_ERRORS,
    },
)
def download(
    round_id: RoundId, client: ReadingClient, factory: SessionFactoryDep, settings: SettingsDep
) -> FileResponse:
    """The round's model artifact, if the caller trained it (and did not drop out) or bought it."""
    path, digest, _ = _entitled_artifact(round_id, client, factory, settings)
    return FileResponse(
        path,
        media_type="application/octet-stream",
        filename=f"mots-round-{round_id}{path.suffix}",
        headers={"X-Model-SHA256": digest},
    )


@router.get("/v1/rounds/{round_id}/model/info", responses=ENTITLEMENT_ERRORS)
def model_info(
    round_id: RoundId, client: ReadingClient, factory: SessionFactoryDep, settings: SettingsDep
) -> ModelInfo:
    """The round's model file: SHA-256, size, coalition, ε and the trainer's metadata (the JSON
    written beside the artifact), for those who may download it; readable without torch."""
    path, digest, price = _entitled_artifact(round_id, client, factory, settings)
    try:
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    meta = {k: v for k, v in meta.items() if k not in ("file", "sha256")}
    participants = meta.get("participants")
    epsilon = meta.get("epsilon")
    return ModelInfo(
        round_id=round_id,
        file=f"mots-round-{round_id}{path.suffix}",
        sha256=digest,
        size=path.stat().st_size,
        format=meta.get("format"),
        participants=[int(k) for k in participants] if isinstance(participants, list) else None,
        epsilon=float(epsilon) if isinstance(epsilon, int | float) else None,
        metadata=meta,
        price=price,
        **signed(round_id, digest, price, settings.token_secret.get_secret_value()),
    )


def signed(round_id: int, digest: str, price: Decimal, secret: str) -> dict[str, str]:
    """The deployment's signature on (round, SHA-256, price) and its key's id (issue 40)."""
    key = signing_key(secret)
    text = model_signing.statement(round_id, digest, money_str(price))
    public = model_signing.public_key_text(key.public_key())
    return {"signature": model_signing.sign(key, text), "key_id": model_signing.key_id(public)}


@router.get(model_signing.WELL_KNOWN_PATH)
def model_key(settings: SettingsDep) -> ModelKey:
    """The public half of the key the market signs its models with (no token needed): a buyer
    saves it once and checks every model file offline (`mots model verify`)."""
    key = signing_key(settings.token_secret.get_secret_value())
    public = model_signing.public_key_text(key.public_key())
    return ModelKey(
        algorithm=model_signing.ALGORITHM,
        public_key=public,
        key_id=model_signing.key_id(public),
    )
