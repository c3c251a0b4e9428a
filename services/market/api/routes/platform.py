"""Where the rest of the platform is: the market, the one URL a client is given, names the round
(orchestration) API, so that a profile holding only the market's URL reaches both."""

from __future__ import annotations

from fastapi import APIRouter

from mots.platform.api.discovery import PlatformOut
from services.market.api.deps import SettingsDep

router = APIRouter(tags=["platform"])


@router.get("/v1/platform")
def platform(settings: SettingsDep) -> PlatformOut:
    """The platform's other APIs as clients reach them (no token needed)."""
    url = settings.orchestration_public_url
    return PlatformOut(
        service="market", api_prefix="/v1", orchestration_url=url.rstrip("/") if url else None
    )
