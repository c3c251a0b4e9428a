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
    MIN_SECRET_CHARS,
    PLACEHOLDER_PREFIX,
    PUBLIC_SECRETS,
    Broker,
    Deployment,
    Observability,
    Operator,
    Tokens,
    placeholder,
)
from mots.platform.settings.evaluation import CALIBRATED_PRIOR

__all__ = ["CALIBRATED_PRIOR", "DEV_OPERATOR_TOKEN", "DEV_TOKEN_SECRET", "PlatformSettings"]


class PlatformSettings(BaseSettings, Deployment, Broker, Operator, Tokens, Observability):
    """Settings common to every service process (API or worker)."""

    model_config = SettingsConfigDict(env_prefix="MOTS_", extra="ignore")

    @model_validator(mode="after")
    def _refuse_missing_or_public_secrets(self) -> PlatformSettings:
        """No built-in secret: each must be set, long enough, and not a public test value."""
        for name, secret in (
            ("MOTS_OPERATOR_TOKEN", self.operator_token),
            ("MOTS_TOKEN_SECRET", self.token_secret),
        ):
            value = secret.get_secret_value()
            if not value:
                raise ValueError(
                    f"{name}: not set; every service needs the deployment's own secret "
                    "(`mots platform up` generates one per workdir in WORKDIR/secrets.env; "
                    "compose reads docker/.env, k8s the mots-secrets Secret)"
                )
            if value in PUBLIC_SECRETS and self.environment != "test":
                raise ValueError(
                    f"{name}: the tests' public value is refused outside the test suite "
                    "(MOTS_ENVIRONMENT=test); set a secret of your own"
                )
            if placeholder(value):
                raise ValueError(
                    f"{name}: docker/.env.example's placeholder ({PLACEHOLDER_PREFIX}…) is public "
                    "with the repository; set a secret of your own in docker/.env"
                )
            if len(value) < MIN_SECRET_CHARS:
                raise ValueError(f"{name}: shorter than {MIN_SECRET_CHARS} characters")
        return self
