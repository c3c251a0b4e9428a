"""The settings registry: every ``MOTS_*`` environment variable, declared once.

Each variable is a field of one :class:`~mots.platform.settings.registry.Group` (``common``,
``market``, ``rounds``, ``evaluation``, ``edge``, ``client``); each process's settings class
selects the groups it reads. :class:`PlatformSettings` is what every service process reads; each
service's ``core/config.py`` extends it with its own groups. No module reads ``os.environ`` for a
setting, so every variable a process reads is declared here; ``docs/settings.md`` lists them
(rendered by ``python -m mots.platform.settings.doc``, checked current by a test).
"""

from __future__ import annotations

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mots.platform.settings.common import (
    DEV_OPERATOR_TOKEN,
    DEV_TOKEN_SECRET,
    Broker,
    Deployment,
    Observability,
    Operator,
    Tokens,
)
from mots.platform.settings.evaluation import CALIBRATED_PRIOR

__all__ = ["CALIBRATED_PRIOR", "DEV_OPERATOR_TOKEN", "DEV_TOKEN_SECRET", "PlatformSettings"]


class PlatformSettings(BaseSettings, Deployment, Broker, Operator, Tokens, Observability):
    """Settings common to every service process (API or worker)."""

    model_config = SettingsConfigDict(env_prefix="MOTS_", extra="ignore")

    @model_validator(mode="after")
    def _refuse_dev_secret_in_production(self) -> PlatformSettings:
        """A production deployment must set its own operator token and token key."""
        if self.environment != "production":
            return self
        if self.operator_token.get_secret_value() == DEV_OPERATOR_TOKEN:
            raise ValueError(
                "MOTS_OPERATOR_TOKEN: the development default is refused when "
                "MOTS_ENVIRONMENT=production; set a secret token"
            )
        if self.token_secret.get_secret_value() == DEV_TOKEN_SECRET:
            raise ValueError(
                "MOTS_TOKEN_SECRET: the development default is refused when "
                "MOTS_ENVIRONMENT=production; set a secret key"
            )
        return self
