"""What every service process reads: deployment, broker, tokens, metrics, its database."""

from __future__ import annotations

from typing import ClassVar, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, SecretStr, model_validator

from mots.platform.settings.registry import Group

DEV_OPERATOR_TOKEN = "dev-operator-token"
DEV_TOKEN_SECRET = "dev-token-secret"
"""The tests' secrets: public, so refused unless ``MOTS_ENVIRONMENT=test`` (no default is
accepted anywhere: `mots platform up` generates a workdir's own, a deployment sets its own)."""
PUBLIC_SECRETS = frozenset({DEV_OPERATOR_TOKEN, DEV_TOKEN_SECRET})
MIN_SECRET_CHARS = 16
PLACEHOLDER_PREFIX = "change-me"
"""docker/.env.example's values start so: published with the repository, as public as the tests'."""


def placeholder(value: str) -> bool:
    """True for a value copied from docker/.env.example (``change-me…``, any case) unchanged."""
    return value.strip().lower().startswith(PLACEHOLDER_PREFIX)


class Deployment(Group):
    """Which kind of deployment this is."""

    environment: Literal["development", "production", "test"] = Field(
        "development",
        description="deployment environment; only `test` (the test suite) admits the tests' public"
        " secrets",
    )


class Broker(Group):
    """Redis (Celery's broker and result backend) and how long a task may take."""

    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Redis URL: Celery broker and result backend shared by the four services",
    )
    redis_key_prefix: str = Field(
        "mots:",
        description="prefix of every Redis key the platform's queues use (isolates deployments)",
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


class Operator(Group):
    """The operator's bearer token (read by the services and by the CLI/SDK)."""

    operator_token: SecretStr = Field(
        SecretStr(""),
        description="bearer token of the platform operator (deposits, rounds, admin reads);"
        " required, at least 16 characters (`mots platform up` generates one per workdir)",
    )


class Tokens(Group):
    """How client tokens are signed and how long they last."""

    token_secret: SecretStr = Field(
        SecretStr(""),
        description="key of the HMAC that signs client tokens (the same in every service: each"
        " verifies a client's token without the market's database); required, at least 16"
        " characters (`mots platform up` generates one per workdir)",
    )
    token_ttl_s: int = Field(
        7 * 86_400,
        ge=60,
        le=366 * 86_400,
        description="seconds a client token is valid; clients renew it before (POST /v1/me/token)",
    )
    revocation_refresh_s: float = Field(
        1.0,
        gt=0,
        le=5,
        description="seconds an API process uses its copy of the token revocation list before"
        " asking Redis whether it changed (a dead token is refused everywhere within this)",
    )
    revocation_max_stale_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="seconds an API process keeps answering from the last revocation list it"
        " read while Redis cannot be read; after that client tokens are answered 503",
    )


class Observability(Group):
    """Metrics endpoint and logging of a process."""

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


class Database(Group):
    """The service's own SQL database (each service has one; none shares another's)."""

    database_name: ClassVar[str] = "platform"
    """Name of the SQLite file a service uses when ``database_url`` is left empty."""

    database_url: str = Field(
        "",
        description="SQLAlchemy URL of the service's own database (SQLite or PostgreSQL); empty:"
        " sqlite:///out/platform/<service>.db",
    )

    @model_validator(mode="after")
    def _default_database(self) -> Database:
        """Empty means the service's SQLite file under out/platform; a URL whose password is
        docker/.env.example's placeholder is refused (the file is public)."""
        if not self.database_url:
            self.database_url = f"sqlite:///out/platform/{self.database_name}.db"
        password = urlsplit(self.database_url).password
        if password is not None and placeholder(unquote(password)):
            raise ValueError(
                "MOTS_DATABASE_URL: its password is docker/.env.example's placeholder "
                f"({PLACEHOLDER_PREFIX}…), public with the repository; set a database password of "
                "your own in docker/.env"
            )
        return self
