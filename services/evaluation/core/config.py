"""Settings of the evaluation service (environment variables with the prefix ``MOTS_``)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field

from mots.platform.settings import PlatformSettings


class Settings(PlatformSettings):
    """The evaluation worker reads these."""

    database_url: str = Field(
        "sqlite:///out/platform/evaluation.db",
        description="SQLAlchemy URL of the measurements database (SQLite default, or PostgreSQL)",
    )
    data_dir: str | None = Field(
        None,
        description="directory of the test set's files (the training package's default if unset)",
    )
    eval_test_subset: int | None = Field(
        None,
        ge=1,
        description="test examples each model is evaluated on (unset: the whole test set)",
    )
    min_fit_points: int = Field(
        4, ge=3, description="distinct coalitions measured before the error model is refitted"
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
