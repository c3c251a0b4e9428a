"""Pydantic schemas of the platform: REST bodies and the JSON payloads of cross-service Celery tasks.

Money crosses every boundary as a Decimal string with at most six decimal places (see
:mod:`mots.platform.money`); tasks carry ``model_dump(mode="json")`` dicts, never pickles. Which
task takes and returns which payload is declared in :mod:`mots.platform.contracts`.
"""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    Strict,
    model_validator,
)

# A client's strategy s_n ∈ {A, J, B} (Eq. 2) is the economics core's, re-exported for the schemas.
from mots.economics.best_response import Strategy as Strategy
from mots.economics.scenario import SCENARIO_EXAMPLE
from mots.platform.money import Money as Money
from mots.platform.money import QuotedMoney, canonical_amount, money, money_str
from mots.platform.timestamps import Timestamp

MAX_AMOUNT = Decimal(10**9)
"""Largest amount one call may move or declare (keeps every balance far inside BIGINT micro-units)."""
PositiveMoney = Annotated[
    Decimal,
    BeforeValidator(canonical_amount),
    Field(gt=0, le=MAX_AMOUNT, max_digits=18, decimal_places=6),
    PlainSerializer(money_str, return_type=str, when_used="json"),
]
MAX_ID = 2**31 - 1
Id = Annotated[int, Strict(), Field(ge=1, le=MAX_ID, description="a positive 32-bit identifier")]
"""An id in a request body: a JSON integer only ("1", 1.0 and true are refused)."""
TypeName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


TOKEN_EXAMPLE = (
    "mots.7.1795709105.4c848faec99956fcb6853eafb5762e2e.FWTQG8XfG7kDOCLwWzysoGTsEFZ6T0hKcLwXim3FXFQ"
)
"""A signed client token as :func:`mots.platform.tokens.sign` makes one (client 7)."""
PRICED_EXAMPLE: dict[str, Any] = {
    "mechanism": "swan_robust",
    "regime": "low",
    "type_names": ["type-1", "type-2", "type-3"],
    "participants": [0, 0, 5],
    "buyers": [10, 5, 0],
    "price": "0.750000",
    "rewards": ["-0.250000", "0.450000", "2.250000"],
    "welfare": 170199.74,
    "epsilon": 0.3227,
    "incentive_cost": "0.000000",
    "optimal": True,
}
SETTLE_EXAMPLE: dict[str, Any] = {
    "round_id": 3,
    "payments": "11.250000",
    "rewards_paid": "11.250000",
    "charges": "0.000000",
    "subsidy": "0.000000",
    "surplus": "0.000000",
    "refunds": "0.000000",
    "subsidy_budget": "50.000000",
    "captured_price": "0.750000",
    "captured_rewards": {"type-1": "-0.250000", "type-2": "0.450000", "type-3": "2.250000"},
    "capture_rule": None,
}
"""Realistic instances (the demo's market, round 3) reused by the models' OpenAPI examples."""


def example(instance: dict[str, Any]) -> ConfigDict:
    """A model's config adding one realistic instance as its OpenAPI example (``examples``)."""
    return ConfigDict(json_schema_extra={"examples": [instance]})


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list route: its items, and the cursor of the next page (``null``: the last);
    see :mod:`mots.platform.paging`."""

    model_config = ConfigDict(extra="forbid")

    items: list[T] = Field(..., description="at most `limit` items, in the route's order")
    next: str | None = Field(
        ...,
        description="pass as `cursor` for the next page; null on the last page",
        examples=["YWZ0ZXI6NDI"],
    )


class MechanismPage(Page[str]):
    """A page of the mechanism names a pricing request may give."""

    model_config = example(
        {"items": ["dynamic", "fl_optimum", "modified_fl", "swan", "swan_robust"], "next": None}
    )


class RoundState(enum.StrEnum):
    """States of a market round; the orchestration service moves a round along them in order."""

    OPEN = "open"
    COLLECTING = "collecting"
    TRAINING = "training"
    EVALUATING = "evaluating"
    SETTLING = "settling"
    PUBLISHED = "published"
    FAILED = "failed"
    SETTLED_BY_RULE = "settled_by_rule"


TERMINAL_STATES = frozenset({RoundState.PUBLISHED, RoundState.SETTLED_BY_RULE})


class MarketRoundState(enum.StrEnum):
    """States of a round at the market (its ledger's view): it takes decisions and purchases
    while ``collecting``; then it is closed, settled (or refunded, when the round failed), and
    its model published. Stored as these strings."""

    COLLECTING = "collecting"
    CLOSED = "closed"
    SETTLED = "settled"
    REFUNDED = "refunded"
    PUBLISHED = "published"

    @property
    def round_state(self) -> RoundState:
        """The round's state as the platform shows it (``GET /v1/quote``)."""
        return _ROUND_STATE_OF_MARKET[self]


_ROUND_STATE_OF_MARKET = {
    MarketRoundState.COLLECTING: RoundState.COLLECTING,
    MarketRoundState.CLOSED: RoundState.TRAINING,
    MarketRoundState.SETTLED: RoundState.SETTLING,
    MarketRoundState.REFUNDED: RoundState.SETTLED_BY_RULE,
    MarketRoundState.PUBLISHED: RoundState.PUBLISHED,
}


# ---------------------------------------------------------------- market REST


class ClientRegistration(_Schema):
    """A registration (Section 2.A.2): a name and, for the type (its label, D_i and C_i), an
    operator-issued ``enrolment_code`` whose attested type the client gets. Without a code, the
    operator's token, or open registration (``MOTS_OPEN_REGISTRATION``), must vouch for the type.
    A claimed type that differs from the code's is refused (409)."""

    model_config = example({"name": "pi-07", "type_name": "type-1", "data_size": 50, "cost": "0.5"})

    name: str = Field(..., min_length=1, max_length=128, description="display name of the client")
    enrolment_code: str | None = Field(
        None,
        min_length=8,
        max_length=128,
        description="one-time code the operator issued for an attested type (POST /v1/enrolments)",
    )
    type_name: TypeName | None = Field(
        None, description="the client's type i; one (D_i, C_i) per type (the code's if omitted)"
    )
    data_size: int | None = Field(
        None, ge=1, le=10_000_000, description="D_i, training samples held (the code's if omitted)"
    )
    cost: Money | None = Field(
        None, ge=0, le=MAX_AMOUNT, description="C_i, participation cost (the code's if omitted)"
    )


class ClientStatus(enum.StrEnum):
    """A client's standing: only ``active`` clients are priced and may declare or buy."""

    ACTIVE = "active"
    PENDING = "pending"
    REVOKED = "revoked"
    LEFT = "left"
    """Left by itself (``DELETE /v1/me``): out of later rounds; reads its wallet and models."""


class RegisteredClient(_Schema):
    """A registered client; ``token`` is shown once and stored only as a hash."""

    model_config = example(
        {
            "id": 7,
            "name": "pi-07",
            "type_name": "type-1",
            "data_size": 50,
            "cost": "0.500000",
            "token": TOKEN_EXAMPLE,
        }
    )

    id: int
    name: str
    type_name: str
    data_size: int
    cost: Money
    status: ClientStatus = ClientStatus.ACTIVE
    token: str = Field(..., description="bearer credential; keep it, it is not shown again")
    token_expires_at: Timestamp | None = Field(
        None,
        description="when the token expires (RFC 3339, UTC); renew it before (POST /v1/me/token)",
    )


MAX_BULK_CLIENTS = 10_000
"""Most clients one ``POST /v1/clients/bulk`` registers."""


BULK_TYPE_EXAMPLE: dict[str, Any] = {
    "type_name": "type-1",
    "data_size": 50,
    "cost": "0.500000",
    "count": 10,
    "name_prefix": "pi-",
}


class BulkType(_Schema):
    """``count`` clients of one type, attested by the operator: named ``<name_prefix><k>``."""

    model_config = example(BULK_TYPE_EXAMPLE)

    type_name: TypeName
    data_size: int = Field(..., ge=1, le=10_000_000, description="D_i, training samples held")
    cost: Money = Field(..., ge=0, le=MAX_AMOUNT, description="C_i, participation cost")
    count: int = Field(..., ge=1, le=MAX_BULK_CLIENTS, description="clients of this type")
    name_prefix: str = Field("client-", min_length=1, max_length=100)


class BulkRegistration(_Schema):
    """An operator's registration of many clients by type, each wallet funded with ``deposit``."""

    model_config = example({"types": [BULK_TYPE_EXAMPLE], "deposit": "10.000000"})

    types: list[BulkType] = Field(..., min_length=1, max_length=64)
    deposit: Money = Field(Decimal(0), ge=0, le=MAX_AMOUNT, description="paid into each wallet")

    @model_validator(mode="after")
    def _at_most_max(self) -> BulkRegistration:
        total = sum(t.count for t in self.types)
        if total > MAX_BULK_CLIENTS:
            raise ValueError(f"types: at most {MAX_BULK_CLIENTS} clients per call, got {total}")
        return self


class BulkRegistered(_Schema):
    """The clients a bulk registration made, in order, each with its token (shown once)."""

    clients: list[RegisteredClient]


class ClientOut(_Schema):
    """A registered client as the market shows it."""

    model_config = example(
        {
            "id": 7,
            "name": "pi-07",
            "type_name": "type-1",
            "data_size": 50,
            "cost": "0.500000",
            "node_key_sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
        }
    )

    id: int
    name: str
    type_name: str
    data_size: int
    cost: Money
    status: ClientStatus = ClientStatus.ACTIVE
    node_key_sha256: str | None = Field(
        None, description="SHA-256 of the client's registered SuperNode public key (None: none)"
    )


class TokenOut(_Schema):
    """A client's new bearer token (rotated or reissued; the previous one is revoked), shown once."""

    model_config = example(
        {"client_id": 7, "token": TOKEN_EXAMPLE, "expires_at": "2026-11-26T16:05:05Z"}
    )

    client_id: int
    token: str
    expires_at: Timestamp = Field(..., description="when the token expires (RFC 3339, UTC)")


MAX_ENROLMENT_USES = 100_000
MAX_ENROLMENT_TTL_S = 366 * 86_400


ENROLMENT_EXAMPLE: dict[str, Any] = {
    "id": 2,
    "type_name": "type-1",
    "data_size": 50,
    "cost": "0.500000",
    "uses_left": 9,
    "expires_at": "2026-11-26T16:05:05Z",
    "revoked": False,
}


class EnrolmentIn(_Schema):
    """An attested type the operator enrols devices into: label, D_i, C_i, uses and lifetime."""

    model_config = example(
        {"type_name": "type-1", "data_size": 50, "cost": "0.500000", "uses": 10, "ttl_s": 604800}
    )

    type_name: TypeName
    data_size: int = Field(..., ge=1, le=10_000_000, description="D_i the operator attests")
    cost: Money = Field(..., ge=0, le=MAX_AMOUNT, description="C_i the operator attests")
    uses: int = Field(1, ge=1, le=MAX_ENROLMENT_USES, description="registrations the code admits")
    ttl_s: int = Field(
        7 * 86_400, ge=60, le=MAX_ENROLMENT_TTL_S, description="seconds until the code expires"
    )


class EnrolmentOut(_Schema):
    """An enrolment as the operator lists it (never its code)."""

    model_config = example(ENROLMENT_EXAMPLE)

    id: int
    type_name: str
    data_size: int
    cost: Money
    uses_left: int
    expires_at: Timestamp = Field(..., description="after this the code is refused (RFC 3339)")
    revoked: bool


class EnrolmentIssued(EnrolmentOut):
    """A new enrolment with its code: shown once, stored only as a hash."""

    model_config = example(ENROLMENT_EXAMPLE | {"code": "enr_4Q8vN2kLx7RtY1cW9bZs3mHd"})

    code: str


MAX_PUBLIC_KEY_CHARS = 4096


class NodeKeyIn(_Schema):
    """The public key of the SuperNode a client trains on (EC on a NIST curve, PEM or OpenSSH):
    the SuperLink admits the node that holds its private key, as this client."""

    model_config = example(
        {
            "challenge": "nkc.7.1767225600.9f2c….Q2x…",
            "signature": "MGUCMQ…",
            "public_key": "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV0U2w0WZ2YB/++Tpockg= pi-07",
        }
    )

    public_key: str = Field(..., min_length=1, max_length=MAX_PUBLIC_KEY_CHARS)
    challenge: str = Field(
        ...,
        min_length=1,
        max_length=256,
        description="a challenge the market issued this client (POST /v1/me/node-key/challenge)",
    )
    signature: str = Field(
        ...,
        min_length=1,
        max_length=512,
        description="the challenge signed with the node's private key (ECDSA-SHA256, DER,"
        " base64url): proof that the caller holds the key it registers",
    )


class NodeKeyChallenge(_Schema):
    """A challenge to sign with the SuperNode's private key, bound to this client, short-lived."""

    model_config = example(
        {"challenge": "nkc.7.1767225600.9f2c….Q2x…", "expires_at": "2026-01-01T00:00:00Z"}
    )

    challenge: str
    expires_at: Timestamp = Field(..., description="after this it is refused (RFC 3339, UTC)")


class NodeKeyOut(_Schema):
    """A client's registered SuperNode key: its id and the key's SHA-256 (PEM form)."""

    model_config = example(
        {
            "client_id": 7,
            "node_key_sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
        }
    )

    client_id: int
    node_key_sha256: str


class TypeQuote(_Schema):
    """The published terms for one type: reward r_i and the target numbers K*_i, B*_i."""

    model_config = example(
        {"type_name": "type-3", "reward": "2.250000", "target_participants": 5, "target_buyers": 0}
    )

    type_name: str
    reward: Money
    target_participants: int
    target_buyers: int


class QuoteOut(_Schema):
    """The current round's published quote: price p, rewards r_i, predicted ε and welfare."""

    model_config = example(
        {
            "round_id": 3,
            "state": "collecting",
            "mechanism": "swan_robust",
            "price": "0.750000",
            "types": [
                {
                    "type_name": "type-1",
                    "reward": "-0.250000",
                    "target_participants": 0,
                    "target_buyers": 10,
                },
                {
                    "type_name": "type-3",
                    "reward": "2.250000",
                    "target_participants": 5,
                    "target_buyers": 0,
                },
            ],
            "epsilon": 0.3227,
            "welfare": 170199.74,
            "incentive_cost": "0.000000",
        }
    )

    round_id: int
    state: RoundState
    mechanism: str
    price: Money
    types: list[TypeQuote]
    epsilon: float
    welfare: float
    incentive_cost: Money
    collect_deadline: Timestamp | None = Field(
        None, description="when the round stops taking decisions (ISO 8601, UTC)"
    )


class DecisionIn(_Schema):
    """A strategy declaration for the open round."""

    model_config = example({"strategy": "buy"})

    strategy: Strategy


class DecisionOut(_Schema):
    """A client's recorded strategy in a round."""

    model_config = example({"round_id": 3, "client_id": 7, "strategy": "buy", "paid": True})

    round_id: int
    client_id: int
    strategy: Strategy
    paid: bool


class PurchaseIn(_Schema):
    """Buy the model of a round at the round's quoted price."""

    model_config = example({"round_id": 3})

    round_id: Id


class PurchaseOut(_Schema):
    """A completed purchase: the price paid, its ledger transaction and the buyer's new balance."""

    model_config = example(
        {
            "purchase_id": 12,
            "round_id": 3,
            "client_id": 7,
            "price": "0.750000",
            "transaction_id": 41,
            "balance": "9.250000",
        }
    )

    purchase_id: int
    round_id: int
    client_id: int
    price: Money
    transaction_id: int | None = Field(..., description="absent when the price is zero")
    balance: Money


class PurchaseRecord(_Schema):
    """One of a client's purchases as the market keeps it (refunded when its round failed)."""

    model_config = example(
        {
            "purchase_id": 12,
            "round_id": 3,
            "price": "0.750000",
            "transaction_id": 41,
            "refunded": False,
        }
    )

    purchase_id: int
    round_id: int
    price: Money
    transaction_id: int | None = Field(..., description="absent when the price was zero")
    refunded: bool


class DepositIn(_Schema):
    """Operator credit of a client's wallet (money received outside the platform)."""

    model_config = example({"client_id": 7, "amount": "10.000000"})

    client_id: Id
    amount: PositiveMoney


class DepositOut(_Schema):
    """A recorded deposit."""

    model_config = example(
        {"transaction_id": 8, "client_id": 7, "amount": "10.000000", "balance": "10.000000"}
    )

    transaction_id: int
    client_id: int
    amount: Money
    balance: Money


class EntryOut(_Schema):
    """One ledger entry (a signed amount on one account)."""

    model_config = example(
        {
            "transaction_id": 41,
            "kind": "purchase",
            "account": "wallet:7",
            "amount": "-0.750000",
            "created_at": "2026-11-26T16:20:09Z",
            "round_id": 3,
        }
    )

    transaction_id: int
    kind: str
    account: str
    amount: Money
    created_at: Timestamp
    round_id: int | None


class TransactionEntry(_Schema):
    """One leg of a ledger transaction: an account and its signed amount."""

    model_config = example({"account": "wallet:7", "amount": "-0.750000"})

    account: str
    amount: Money


class TransactionOut(_Schema):
    """A ledger transaction across accounts, as the operator reads it (its entries sum to 0)."""

    model_config = example(
        {
            "id": 41,
            "kind": "purchase",
            "round_id": 3,
            "client_id": 7,
            "created_at": "2026-11-26T16:20:09Z",
            "entries": [
                {"account": "wallet:7", "amount": "-0.750000"},
                {"account": "round:3:pool", "amount": "0.750000"},
            ],
        }
    )

    id: int
    kind: str = Field(..., description="deposit, purchase, refund, reward, charge, subsidy, …")
    round_id: int | None
    client_id: int | None
    created_at: Timestamp
    entries: list[TransactionEntry]


class AccountOut(_Schema):
    """A ledger account and its balance (wallets, round pools, platform and external)."""

    model_config = example(
        {
            "name": "platform:subsidy",
            "category": "platform_subsidy",
            "client_id": None,
            "balance": "-1.500000",
        }
    )

    name: str
    category: str
    client_id: int | None
    balance: Money


class BalanceOut(_Schema):
    """A client's wallet balance and its ledger entries, newest first."""

    model_config = example(
        {
            "client_id": 7,
            "balance": "9.250000",
            "entries": [
                {
                    "transaction_id": 41,
                    "kind": "purchase",
                    "account": "wallet:7",
                    "amount": "-0.750000",
                    "created_at": "2026-11-26T16:20:09Z",
                    "round_id": 3,
                }
            ],
        }
    )

    client_id: int
    balance: Money
    entries: list[EntryOut]


class ModelInfo(_Schema):
    """A published round's model file: its digest, size and the metadata written beside it
    (``GET /v1/rounds/{id}/model/info``; the client saves it as ``mots-round-N.json``)."""

    model_config = example(
        {
            "round_id": 3,
            "file": "mots-round-3.pt",
            "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "size": 431517,
            "format": "mots-model/1",
            "participants": [0, 0, 5],
            "epsilon": 0.341,
            "metadata": {"dataset": "fashion-mnist", "fedavg_rounds": 5},
        }
    )

    round_id: int = Field(..., description="the market round that produced the model")
    file: str = Field(..., description="the file name a download gets: mots-round-N.pt")
    sha256: str = Field(..., description="hex SHA-256 of the file, as X-Model-SHA256 sends it")
    size: int = Field(..., description="bytes")
    format: str | None = Field(..., description="the file's format tag (mots-model/1)")
    participants: list[int] | None = Field(..., description="the coalition K: trainers per type")
    epsilon: float | None = Field(..., description="the training's test loss ε of the model")
    metadata: dict[str, Any] = Field(
        ...,
        description="everything the trainer recorded (data set, model, FedAvg rounds, …)",
    )


class LedgerCheck(_Schema):
    """The ledger's invariants: every transaction sums to zero; balances equal their entries."""

    model_config = example(
        {
            "transactions": 58,
            "entries": 116,
            "unbalanced_transactions": 0,
            "mismatched_accounts": 0,
            "total": "0.000000",
            "accounts": {"external": "-200.000000", "platform": "0.000000", "wallet:7": "9.250000"},
        }
    )

    transactions: int
    entries: int
    unbalanced_transactions: int
    mismatched_accounts: int
    total: Money
    accounts: dict[str, Money]

    @property
    def balanced(self) -> bool:
        """True when no invariant is broken."""
        return (
            self.unbalanced_transactions == 0 and self.mismatched_accounts == 0 and self.total == 0
        )


# ---------------------------------------------------------------- pricing


class ErrorModelIn(_Schema):
    """ε0, dγ² and σ² of Eq. (3)."""

    d_gamma2: float = Field(..., gt=0, allow_inf_nan=False)
    sigma2: float = Field(0.0, ge=0, allow_inf_nan=False)
    eps0: float = Field(0.0, ge=0, allow_inf_nan=False)


class PricingRequest(_Schema):
    """A scenario (as :func:`mots.scenario_file.parse_scenario` reads it) and the state to price.

    ``participants`` absent: price the welfare-maximising state K* (Problem 2); present: evaluate
    the mechanism's schedule p(K), r_i(K) at that realised state.
    """

    model_config = example(
        {
            "scenario": SCENARIO_EXAMPLE,
            "mechanism": "swan_robust",
            "participants": None,
            "buyers": None,
        }
    )

    scenario: dict[str, Any] = Field(..., description="types, error_model, utility, eps_req")
    mechanism: str | None = Field(
        None, description="mechanism name; the registry default if absent"
    )
    participants: list[int] | None = Field(None, description="K per type, in the scenario's order")
    buyers: list[int] | None = Field(None, description="B per type; N − K if absent")


class WhatIfRequest(_Schema):
    """A what-if query: the same scenario with another ε_req or another cost of one type."""

    model_config = example(
        {
            "scenario": SCENARIO_EXAMPLE,
            "mechanism": "swan_robust",
            "eps_req": None,
            "no_requirement": False,
            "type_name": "type-2",
            "cost": "0.800000",
        }
    )

    scenario: dict[str, Any]
    mechanism: str | None = None
    eps_req: float | None = Field(None, gt=0, description="another ε_req (absent: keep)")
    no_requirement: bool = Field(False, description="drop ε_req (ε_req = +∞)")
    type_name: str | None = Field(None, description="type whose cost changes")
    cost: Money | None = Field(None, ge=0, le=MAX_AMOUNT, description="new C_i of type_name")


class PricingResult(_Schema):
    """SWAN's terms at a state, with the state's welfare (Eq. 5) and the platform's incentive cost."""

    model_config = example(PRICED_EXAMPLE)

    mechanism: str
    regime: Literal["low", "high"]
    type_names: list[str]
    participants: list[int]
    buyers: list[int]
    price: QuotedMoney
    rewards: list[QuotedMoney]
    welfare: float
    epsilon: float
    incentive_cost: QuotedMoney = Field(
        ..., description="[Σ K_i r_i − Σ B_i p]⁺ (Problem 1's Eq. 7)"
    )
    optimal: bool = Field(..., description="True when the state is the welfare maximiser K*")

    @model_validator(mode="before")
    @classmethod
    def _stored_floats(cls, data: Any) -> Any:
        """Quotes stored before the amounts were Money (floats in a JSON column) still load,
        rounded once as :func:`mots.platform.money.money` books them."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for key in ("price", "incentive_cost"):
            if isinstance(out.get(key), float):
                out[key] = money(out[key])
        if isinstance(out.get("rewards"), list):
            out["rewards"] = [money(r) if isinstance(r, float) else r for r in out["rewards"]]
        return out


class EquilibriumRequest(_Schema):
    """A realised state (K, B) of a scenario to check under a mechanism's schedule."""

    scenario: dict[str, Any] = Field(..., description="types, error_model, utility, eps_req")
    mechanism: str | None = Field(
        None, description="mechanism name; the registry default if absent"
    )
    participants: list[int] = Field(..., description="K per type, in the scenario's order")
    buyers: list[int] = Field(..., description="B per type, in the scenario's order")


class EquilibriumResult(_Schema):
    """Whether no client gains by a unilateral move at (K, B), and why the check stopped."""

    equilibrium: bool
    reason: str


# ---------------------------------------------------------------- cross-service task payloads


class NoInput(_Schema):
    """The input of a task that takes none (an empty JSON object)."""


class RoundRef(_Schema):
    """A task about one round, named by its id."""

    round_id: int


class NodeKeysRequest(_Schema):
    """Clients whose SuperNode public keys the orchestration needs (a round's participants)."""

    client_ids: list[int]


class NodeKeys(_Schema):
    """SuperNode public keys (PEM) by client id; a client without a registered key is absent."""

    keys: dict[int, str]


class PublishedRound(_Schema):
    """Acknowledges that a round's measurement now counts (its model was published)."""

    round_id: int
    counted: bool


class MarketRoundStatus(_Schema):
    """A market round's state after the market acted on it (``collecting``, ``published``, …)."""

    round_id: int
    state: MarketRoundState


class AdvanceRequest(_Schema):
    """Run the step of ``state`` for a round (nothing happens if the round has left ``state``)."""

    round_id: int
    state: RoundState


class AdvanceResult(_Schema):
    """What a step did: the state whose step comes next (None: none), a retry scheduled, or
    (``waiting``) a call sent whose reply runs the step again."""

    round_id: int
    next: RoundState | None = None
    retry: bool = False
    waiting: bool = False


class PopulationType(_Schema):
    """One declared type with the clients registered under it."""

    name: str
    data_size: int
    cost: Money
    client_ids: list[int]


class Population(_Schema):
    """The registered population, types in non-decreasing data size (the order Eq. 3 expects)."""

    types: list[PopulationType]


class OpenRoundPayload(_Schema):
    """The quote the orchestration service publishes to the market when a round opens."""

    round_id: int
    mechanism: str
    price: Money
    rewards: dict[str, Money]
    target_participants: dict[str, int]
    target_buyers: dict[str, int]
    epsilon: float
    welfare: float
    incentive_cost: Money
    subsidy_budget: Money | None = Field(
        None,
        ge=0,
        le=MAX_AMOUNT,
        description="most the platform may subsidise this round (None: the market's default)",
    )
    collect_deadline: Timestamp | None = Field(
        None, description="when the round stops taking decisions; the silent then abstain"
    )
    members: list[int] | None = Field(
        None,
        description="the client ids the round was priced for (its population): only they may "
        "declare and buy in it (None: the clients active when the market opens it)",
    )


class RoundDecisions(_Schema):
    """Who declared what in a round, as the market recorded it."""

    round_id: int
    registered: int
    declared: int
    participants: dict[str, list[int]] = Field(..., description="client ids per type joining")
    buyers: dict[str, list[int]] = Field(..., description="client ids per type that declared buy")
    paid_buyers: dict[str, list[int]] = Field(..., description="buyers whose purchase is paid")


class DeclarationProgress(_Schema):
    """How far a round's collection has got: O(1) to read at the market (its tally counters)."""

    round_id: int
    state: MarketRoundState = Field(..., description="the market's state of the round")
    registered: int = Field(..., description="clients registered when the round opened")
    declared: int = Field(..., description="clients that have declared (or bought) so far")


class SettlePayload(_Schema):
    """What the market books at settlement: rewards to the participants that completed training.

    ``dropped`` participants forfeit their reward and are not charged (the drop-out rule);
    ``refund_buyers`` returns every buyer's payment (a failed round). The realised terms are
    captured within the round's quote and subsidy budget (:mod:`mots.economics.capture`).
    """

    round_id: int
    rewards: dict[str, Money] = Field(..., description="r_i per type at the realised state")
    price: Money | None = Field(
        None, description="p at the realised state (None: buyers pay the quoted price)"
    )
    participants: list[int] = Field(..., description="client ids paid or charged r_i")
    dropped: list[int] = Field(default_factory=list)
    refund_buyers: bool = False
    artifact_path: str | None = None
    artifact_sha256: str | None = None


class SettleResult(_Schema):
    """Totals of a settlement, from the ledger."""

    model_config = example(SETTLE_EXAMPLE)

    round_id: int
    payments: Money
    rewards_paid: Money
    charges: Money
    subsidy: Money
    surplus: Money
    refunds: Money
    subsidy_budget: Money | None = Field(None, description="the round's cap on the subsidy")
    captured_price: Money | None = Field(None, description="what each paid buyer was charged")
    captured_rewards: dict[str, Money] = Field(
        default_factory=dict, description="r_i per type as booked: within the quote and budget"
    )
    capture_rule: str | None = Field(None, description="the stated capture rule that applied")
    removed: list[int] = Field(
        default_factory=list,
        description="participants revoked or departed before settlement: not paid, not charged",
    )


class EvaluationRequest(_Schema):
    """A trained round's model to measure, with its coalition (K per type) and data sizes."""

    round_id: int
    artifact_path: str
    artifact_sha256: str
    participants: list[int]
    sizes: list[float]
    train_epsilon: float | None = None


class ErrorFit(_Schema):
    """The error model refitted from all measurements so far (Eq. 3 with ε0)."""

    model_config = example(
        {"eps0": 0.29, "d_gamma2": 10.4, "sigma2": 0.018, "r2": 0.97, "points": 4}
    )

    eps0: float
    d_gamma2: float
    sigma2: float
    r2: float | None
    points: int


class EvaluationResult(_Schema):
    """The measured test loss of a round's model and the refitted error model."""

    round_id: int
    test_loss: float
    accuracy: float | None
    seconds: float
    fit: ErrorFit | None


class ErrorPosteriorEstimate(_Schema):
    """The evaluation service's posterior over Eq. 3's parameters (:mod:`mots.economics.error_online`):
    the point estimate pricing uses, each parameter's posterior standard deviation, and how many
    published measurements it holds (0: the prior)."""

    eps0: float
    d_gamma2: float
    sigma2: float
    sd: dict[str, float] = Field(..., description="posterior sd of eps0, d_gamma2 and sigma2")
    points: int


class CurrentErrorModel(_Schema):
    """The error model learned from every published measurement so far: the least-squares ``fit``
    (None below enough distinct coalitions) and the Bayesian ``posterior`` (from the first)."""

    fit: ErrorFit | None
    posterior: ErrorPosteriorEstimate | None = None
