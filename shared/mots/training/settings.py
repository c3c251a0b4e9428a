"""Settings of the training package read from the environment (declared in the registry,
:class:`mots.platform.settings.rounds.ServerApp`).

Only what a process cannot derive itself: where the Flower app that ``flwr run`` submits lives.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

from mots.platform.settings.rounds import ServerApp


class TrainingSettings(BaseSettings, ServerApp):
    """Where the deployment engine finds the Flower app (its ServerApp and pyproject.toml)."""

    model_config = SettingsConfigDict(env_prefix="MOTS_", extra="ignore")
