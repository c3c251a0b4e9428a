"""Settings of the training package read from the environment (prefix ``MOTS_``).

Only what a process cannot derive itself: where the Flower app that ``flwr run`` submits lives.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class TrainingSettings(BaseSettings):
    """Where the deployment engine finds the Flower app (its ServerApp and pyproject.toml)."""

    model_config = SettingsConfigDict(env_prefix="MOTS_", extra="ignore")

    server_app_dir: Path | None = Field(
        None,
        description="directory of the Flower app (edge/flower_app, holding pyproject.toml) that "
        "the deployment engine submits; unset: the installed edge.flower_app package's directory",
    )
