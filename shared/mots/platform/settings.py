"""The settings base every service extends: environment variables with the prefix ``MOTS_``.

Each service's ``core/config.py`` subclasses :class:`PlatformSettings`; no module reads
``os.environ`` directly, so every variable a process reads is declared (with a description) here
or in a service's ``Settings``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_OPERATOR_TOKEN = "dev-operator-token"
DEV_TOKEN_SECRET = "dev-token-secret"
CALIBRATED_PRIOR = {"eps0": 0.65, "d_gamma2": 39.4, "sigma2": 0.0}
"""Eq. (3) fitted to the platform's default training (see the orchestration's settings); the prior
of the error model both the orchestration and the evaluation service read (MOTS_PRIOR_ERROR_MODEL)."""


class PlatformSettings(BaseSettings):
    """Settings common to every service process (API or worker)."""

    model_config = SettingsConfigDict(env_prefix="MOTS_", extra="ignore")

    environment: Literal["development", "production"] = Field(
        "development",
        description="deployment environment; production refuses the development operator token",
    )
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Redis URL: Celery broker and result backend shared by the four services",
    )
    redis_key_prefix: str = Field(
        "mots:",
        description="prefix of every Redis key the platform's queues use (isolates deployments)",
    )
    operator_token: SecretStr = Field(
        SecretStr(DEV_OPERATOR_TOKEN),
        description="bearer token of the platform operator (deposits, rounds, admin reads)",
    )
    token_secret: SecretStr = Field(
        SecretStr(DEV_TOKEN_SECRET),
        description="key of the HMAC that signs client tokens (the same in every service: each"
        " verifies a client's token without the market's database)",
    )
    token_ttl_s: int = Field(
        7 * 86_400,
        ge=60,
        le=366 * 86_400,
        description="seconds a client token is valid; clients renew it before (POST /v1/me/token)",
    )
    task_timeout_s: float = Field(
        120.0, gt=0, description="seconds a service waits for another service's Celery task"
    )
    broker_visibility_timeout_s: float = Field(
        3600.0,
        gt=0,
        description="seconds before Redis hands an unacknowledged task to another worker; "
        "longer than the longest task (the orchestration's training step, MOTS_TRAIN_TIMEOUT_S)",
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="port of the process's Prometheus /metrics endpoint (a worker's, or an API's"
        " apart from its API port); 0 = none (an API then serves /metrics on its API port)",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        description="interface a worker's /metrics endpoint binds: 127.0.0.1 (one machine) or "
        "0.0.0.0 (scraped by Prometheus from another container or pod)",
    )
    log_level: str = Field("INFO", description="log level of the service process")

    @model_validator(mode="after")
    def _refuse_dev_secret_in_production(self) -> PlatformSettings:
        """A production deployment must set its own operator token."""
        if (
            self.environment == "production"
            and self.operator_token.get_secret_value() == DEV_OPERATOR_TOKEN
        ):
            raise ValueError(
                "MOTS_OPERATOR_TOKEN: the development default is refused when "
                "MOTS_ENVIRONMENT=production; set a secret token"
            )
        if (
            self.environment == "production"
            and self.token_secret.get_secret_value() == DEV_TOKEN_SECRET
        ):
            raise ValueError(
                "MOTS_TOKEN_SECRET: the development default is refused when "
                "MOTS_ENVIRONMENT=production; set a secret key"
            )
        return self
