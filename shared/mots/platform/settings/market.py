"""What the market declares: its ledger's writers, registration, the type bound, token caching."""

from __future__ import annotations

import ipaddress
from decimal import Decimal
from typing import ClassVar

from pydantic import Field, field_validator

from mots.platform.settings.registry import Group


class Ledger(Group):
    """How the market writes its ledger."""

    owner: ClassVar[str] = "market"

    db_pool_size: int = Field(
        20, ge=1, description="connections the market keeps open to a PostgreSQL ledger"
    )
    purchase_max_batch: int = Field(
        256,
        ge=1,
        le=4096,
        description="most purchases booked in one database transaction (1: one transaction each)",
    )
    purchase_writers: int | None = Field(
        None,
        ge=1,
        le=16,
        description="batches (purchases, declarations, registrations each) booked at once per"
        " process (each its own transaction, pool shard and, on PostgreSQL, connection); unset: 1"
        " on SQLite, and on PostgreSQL 2 shared among the API processes (2 for one, 1 each for"
        " two or more)",
    )
    api_processes: int = Field(
        1,
        ge=1,
        le=256,
        description="market API processes serving on this host and database (set by"
        " `python -m mots.platform.serve --workers N`); the default batch writers are shared"
        " among them",
    )


class Types(Group):
    """The bound on distinct client types (the solver's time grows about as I³)."""

    owner: ClassVar[str] = "pricing"

    max_types: int = Field(
        32,
        ge=1,
        le=1024,
        description="most distinct client types: a scenario with more is refused by pricing (422),"
        " an enrolment or registration of one more type by the market (409)",
    )


class Registration(Group):
    """Who may register at the market and how token checks are cached."""

    owner: ClassVar[str] = "market"

    token_cache_s: float = Field(
        5.0,
        ge=0,
        le=300,
        description="seconds an API process trusts a verified client token without asking the"
        " database again: a revocation or approval takes effect within this time",
    )
    open_registration: bool = Field(
        False,
        description="let clients register without an enrolment code: they stay pending (not"
        " priced, cannot declare or buy) until the operator approves them",
    )
    open_registration_max_cost: Decimal = Field(
        Decimal(10),
        ge=0,
        description="largest participation cost C_i a self-registered client may declare",
    )
    open_registration_max_data_size: int = Field(
        100_000, ge=1, description="largest data size D_i a self-registered client may declare"
    )
    open_registration_per_minute: int = Field(
        5, ge=1, description="self-registrations one IP address may make per minute (then 429)"
    )
    trusted_proxies: str = Field(
        "",
        description="comma-separated addresses or CIDR networks of the reverse proxies in front"
        " of the market API: only a request whose TCP peer is one of them is counted by the"
        " address its X-Forwarded-For names (the rightmost entry that is no such proxy) in the"
        " per-address limits (enrolment-code guesses, open registration); empty: always the peer",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str) -> str:
        """Each entry must be an IP address or network (a typo would trust nobody, silently)."""
        for entry in filter(None, (e.strip() for e in value.split(","))):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(
                    f"MOTS_TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR network"
                ) from exc
        return value


class SubsidyBudget(Group):
    """The platform's cap on what one round costs it (carried in the round's quote)."""

    owner: ClassVar[str] = "orchestration"

    round_subsidy_budget: Decimal = Field(
        Decimal(100),
        ge=0,
        le=10**9,
        description="most the platform subsidises one round (Σ payouts − Σ charges − Σ payments,"
        " currency units) when the round names no budget of its own (POST /v1/rounds); payouts"
        " beyond it are scaled down pro rata at settlement",
    )


class Artifacts(Group):
    """Where the trained models lie (written by orchestration, served by the market)."""

    owner: ClassVar[str] = "orchestration"

    artifact_dir: str = Field(
        "out/platform/artifacts",
        description="directory of the trained model artifacts: orchestration writes them there,"
        " the market serves only files under it",
    )


class Discovery(Group):
    """What the market tells a client about the platform it belongs to (``GET /v1/platform``)."""

    owner: ClassVar[str] = "market"

    orchestration_public_url: str | None = Field(
        None,
        description="the round (orchestration) API's base URL as clients reach it, which the"
        " market tells them at GET /v1/platform so that a client needs only the market's URL"
        " (`mots platform up` sets it); unset: the market answers that it does not know",
    )


class StoredTasks(Group):
    """Where a service reads the tasks the market stores (``GET /v1/tasks/{name}``), for a task
    no task file names (issue 36)."""

    owner: ClassVar[str] = "market"

    market_internal_url: str | None = Field(
        None,
        description="the market API's base URL as the other services reach it (http(s)://…):"
        " a task created only at the market (POST /v1/tasks) is read there, with the operator"
        " token, by its name; unset: only task files ($MOTS_TASKS_DIR, examples/tasks) name tasks",
    )

    @field_validator("market_internal_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        """Empty means unset; anything else an http(s) URL."""
        if value is None or not value.strip():
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"MOTS_MARKET_INTERNAL_URL: must start with http(s)://, got {value!r}")
        return value.strip().rstrip("/")
