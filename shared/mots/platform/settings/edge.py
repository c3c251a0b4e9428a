"""What an edge device's agent reads (prefix ``MOTS_EDGE_``): its private facts, where the market
and the SuperLink are. The market's utility it reads from ``MOTS_UTILITY`` (:class:`.rounds.MarketValue`)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, SecretStr, field_validator

from mots.platform.settings.registry import Group

TypeName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class EdgeDevice(Group):
    """One edge device: its type label, data size D_i, cost C_i, and the platform's addresses."""

    owner: ClassVar[str] = "edge"
    prefix: ClassVar[str] = "MOTS_EDGE_"

    client_type: TypeName = Field(..., description="the client's type i (the Pi's node label)")
    data_size: int = Field(..., ge=1, le=10_000_000, description="D_i, training samples held")
    cost: Decimal = Field(
        ..., ge=0, max_digits=18, decimal_places=6, description="C_i, participation cost"
    )
    client_name: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="name of this device at the market (unset: the host name; k8s: the node name)",
    )
    market_url: str = Field("http://127.0.0.1:8000", description="base URL of the market API")
    enrolment_code: SecretStr | None = Field(
        None,
        description="the operator's enrolment code for this device's type, redeemed at its first"
        " registration (unset: read from enrolment_code_file)",
    )
    token_renew_before_s: float = Field(
        86_400,
        gt=0,
        description="renew the market token when it expires within this many seconds (keep it"
        " well below the market's MOTS_TOKEN_TTL_S)",
    )
    enrolment_code_file: Path = Field(
        Path("/etc/mots/enrolment/code"),
        description="file holding the enrolment code (a mounted Secret); absent: register"
        " without one, which only a market with open registration admits (as pending). Another"
        " task's code (a client per task) is the file beside it named <file>.<task>",
    )
    state_dir: Path = Field(
        Path("/var/lib/mots/agent"),
        description="where the agent keeps its market credential and heartbeat",
    )
    poll_interval_s: float = Field(5.0, gt=0, description="seconds between reads of the quote")
    superlink_address: str = Field(
        "127.0.0.1:9092", description="host:port of the SuperLink's Fleet API"
    )
    root_certificates: Path = Field(
        Path("/var/lib/mots/ca/ca.crt"),
        description="the CA certificate that verifies the SuperLink (TLS)",
    )
    node_key: Path | None = Field(
        None,
        description="this device's SuperNode private key: made here on first start, never leaves "
        "the device; its public key is what the agent registers with the market (unset: "
        "supernode.key in the state directory)",
    )
    health_port: int = Field(
        8081, ge=1, le=65535, description="port of the SuperNode's gRPC health service"
    )
    node_config: str = Field(
        "",
        description="extra SuperNode node-config pairs ('key=value ...') the ClientApp reads",
    )
    client_index: int | None = Field(
        None,
        ge=0,
        description="the device's index within its type: its public-set slice without --data "
        "(unset: read from the file client-index in data_dir), only its batch order with --data "
        "(unset: 0)",
    )
    data_dir: Path = Field(
        Path("/var/lib/mots/data"),
        description="the public set a device without --data slices (unused with --data: the "
        "device's own folder per task)",
    )
    release_file_pages: bool | None = Field(
        None,
        description="0 keeps mapped the code pages the warm SuperNode's imports touched; unset or "
        "1: it unmaps them once torch and the ClientApp are loaded (mots.training.residency)",
    )

    @field_validator("market_url")
    @classmethod
    def _url_has_scheme(cls, v: str) -> str:
        """The market URL is an http(s) URL; a trailing slash is dropped."""
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"MOTS_EDGE_MARKET_URL: must start with http(s)://, got {v!r}")
        return v.rstrip("/")
