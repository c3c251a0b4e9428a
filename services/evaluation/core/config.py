"""Settings of the evaluation service: the registry's groups it reads (``mots.platform.settings``)."""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar

from mots.platform.settings import PlatformSettings
from mots.platform.settings.common import Database
from mots.platform.settings.evaluation import ErrorPrior, ErrorUpdates
from mots.platform.settings.market import StoredTasks


class Settings(PlatformSettings, Database, ErrorPrior, ErrorUpdates, StoredTasks):
    """The evaluation worker reads these."""

    database_name: ClassVar[str] = "evaluation"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
