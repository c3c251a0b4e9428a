"""Settings of the pricing service (environment variables with the prefix ``MOTS_``)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field

from mots.platform.settings import PlatformSettings


class Settings(PlatformSettings):
    """The pricing API and worker read these."""

    mechanism: str = Field(
        "swan_robust",
        description="mechanism used when a request names none (a name from the mechanism registry)",
    )
    max_types: int = Field(
        32,
        ge=1,
        description="most distinct client types a scenario may have (the solver's time grows about "
        "as I³, not with the number of clients); more are refused (422)",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
