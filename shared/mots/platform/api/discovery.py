"""The market's discovery answer (``GET /v1/platform``): where the rest of the platform is."""

from __future__ import annotations

from pydantic import Field

from mots.platform.api.base import Schema, example


class PlatformOut(Schema):
    """Where the rest of the platform is, as the market knows it (``GET /v1/platform``): a
    client given only the market's URL finds the round API here (issue 40: a profile saved with
    one URL could not list rounds)."""

    model_config = example(
        {"service": "market", "api_prefix": "/v1", "orchestration_url": "http://127.0.0.1:8103"}
    )

    service: str = Field(..., description="Always ``market``: a client checks it asked the market.")
    api_prefix: str = Field(..., description="The prefix of every route; not part of a base URL.")
    orchestration_url: str | None = Field(
        ..., description="The round API's base URL (null when the operator did not set it)."
    )
