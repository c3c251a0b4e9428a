"""Settings of the pricing service: the registry's groups it reads (``mots.platform.settings``)."""

from __future__ import annotations

from functools import lru_cache

from mots.platform.settings import PlatformSettings
from mots.platform.settings.market import Types
from mots.platform.settings.rounds import Mechanism


class Settings(PlatformSettings, Mechanism, Types):
    """The pricing API reads these."""


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
