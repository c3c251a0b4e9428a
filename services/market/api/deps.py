"""Dependencies of the market routes, as ``Annotated`` aliases a route's signature reads as its needs.

The ones every service has (operator, session factory, Celery client) come from
:mod:`mots.platform.deps`; the market adds its clients' identity (:data:`CurrentClient`,
:data:`CallerDep`: the checks are :mod:`services.market.auth`'s), its typed settings, the
Idempotency-Key header and the round id in a path. Declarations only: no code here runs on a
request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path

from mots.platform.api.base import MAX_ID
from mots.platform.deps import CeleryDep, OperatorDep, SessionFactoryDep, app_settings
from services.market.auth import (
    BEARER_SECURITY,
    Caller,
    any_client,
    caller,
    current_client,
    reading_client,
)
from services.market.core.config import Settings
from services.market.models import Client

__all__ = [
    "BEARER_SECURITY",
    "AnyClient",
    "CallerDep",
    "CeleryDep",
    "CurrentClient",
    "IdempotencyKeyHeader",
    "OperatorDep",
    "ReadingClient",
    "RoundId",
    "SessionFactoryDep",
    "SettingsDep",
]

SettingsDep = Annotated[Settings, Depends(app_settings)]


CurrentClient = Annotated[Client, Depends(current_client)]
AnyClient = Annotated[Client, Depends(any_client)]
ReadingClient = Annotated[Client, Depends(reading_client)]
CallerDep = Annotated[Caller, Depends(caller)]
IdempotencyKeyHeader = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=8,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="unique per intended operation; a retry with the same key is not booked twice",
    ),
]
RoundId = Annotated[int, Path(ge=1, le=MAX_ID, description="the round's id")]
