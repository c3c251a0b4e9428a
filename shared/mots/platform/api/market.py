"""The market's REST bodies (``services/market``; the SDK's :class:`mots.client.MarketClient`)."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Any

from pydantic import ConfigDict, Field, model_validator

# A client's strategy s_n ∈ {A, J, B} (Eq. 2) is the economics core's, re-exported for the schemas.
from mots.economics.best_response import Strategy as Strategy
from mots.platform.api.base import (
    TOKEN_EXAMPLE,
    BoundedMoney,
    Id,
    PositiveMoney,
    RoundState,
    Schema,
    TypeName,
    example,
)
from mots.platform.api.enrolments import ENROLMENT_EXAMPLE as ENROLMENT_EXAMPLE
from mots.platform.api.enrolments import MAX_ENROLMENT_TTL_S as MAX_ENROLMENT_TTL_S
from mots.platform.api.enrolments import MAX_ENROLMENT_USES as MAX_ENROLMENT_USES
from mots.platform.api.enrolments import EnrolmentIn as EnrolmentIn
from mots.platform.api.enrolments import EnrolmentIssued as EnrolmentIssued
from mots.platform.api.enrolments import EnrolmentOut as EnrolmentOut
from mots.platform.api.node_keys import MAX_PUBLIC_KEY_CHARS as MAX_PUBLIC_KEY_CHARS
from mots.platform.api.node_keys import NodeKeyChallenge as NodeKeyChallenge
from mots.platform.api.node_keys import NodeKeyIn as NodeKeyIn
from mots.platform.api.node_keys import NodeKeyOut as NodeKeyOut
from mots.platform.api.node_keys import NodeKeyProof as NodeKeyProof
from mots.platform.api.sales import (
    LATE_PURCHASE_DESCRIPTION,
    NEXT_ROUND_DESCRIPTION,
    NOT_SCHEDULED,
    ON_SALE_DESCRIPTION,
    ON_SALE_EXAMPLE,
    OnSale,
)
from mots.platform.api.tasks import DEFAULT_TASK, OfTask, TaskName
from mots.platform.money import Money as Money
from mots.platform.money import QuotedMoney
from mots.platform.timestamps import Timestamp


class ClientRegistration(Schema):
    """A registration (Section 2.A.2): a name and, for the type (its label, D_i and C_i), an
    operator-issued ``enrolment_code`` whose attested type the client gets. Without a code, the
    operator's token, or open registration (``MOTS_OPEN_REGISTRATION``), must vouch for the type.
    A claimed type that differs from the code's is refused (409)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "pi-07", "type_name": "type-1", "data_size": 50, "cost": "0.5"},
                # a device enrolled into a task by its code (issue 36; the code's task if omitted)
                {
                    "name": "pi-12",
                    "enrolment_code": "enrol_4Q8vN2kLx7RtY1cW9bZs3mHd",
                    "task": "digits",
                },
            ],
            # with a code, or else the whole type (routes/clients.py's _claimed; issue 37)
            "anyOf": [
                {
                    "required": ["enrolment_code"],
                    "properties": {"enrolment_code": {"type": "string"}},
                },
                {
                    "required": ["type_name", "data_size", "cost"],
                    "properties": {
                        "type_name": {"type": "string"},
                        "data_size": {"type": "integer"},
                        "cost": {"type": "string"},
                    },
                },
            ],
        },
    )

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
    cost: BoundedMoney | None = Field(
        None, description="C_i, participation cost (the code's if omitted)"
    )
    task: TaskName | None = Field(None, description="its task (the code's, else fashion-mnist)")


class ClientStatus(enum.StrEnum):
    """A client's standing: only ``active`` clients are priced and may declare or buy."""

    ACTIVE = "active"
    PENDING = "pending"
    REVOKED = "revoked"
    LEFT = "left"
    """Left by itself (``DELETE /v1/me``): out of later rounds; reads its wallet and models."""


class RegisteredClient(OfTask):
    """A registered client; ``token`` is shown once and stored only as a hash."""

    model_config = example(
        {
            "id": 7,
            "name": "pi-07",
            "type_name": "type-1",
            "data_size": 50,
            "cost": "0.500000",
            "token": TOKEN_EXAMPLE,
            "task": "fashion-mnist",
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


BULK_TASK_TYPE_EXAMPLE: dict[str, Any] = {
    "type_name": "type-1",
    "data_size": 20,
    "cost": "0.200000",
    "count": 5,
    "name_prefix": "digits-",
    "task": "digits",
}
"""A bulk type of another task than the default (issue 36): ``digits``, stored by
``mots tasks create examples/tasks/digits.yaml``."""


class BulkType(Schema):
    """``count`` clients of one type of one task, attested by the operator: named
    ``<name_prefix><k>``. A type belongs to its task: type-1 of digits and type-1 of
    fashion-mnist are two types, each with its own (D_i, C_i)."""

    model_config = example(BULK_TYPE_EXAMPLE)

    type_name: TypeName
    data_size: int = Field(..., ge=1, le=10_000_000, description="D_i, training samples held")
    cost: BoundedMoney = Field(..., description="C_i, participation cost")
    count: int = Field(..., ge=1, le=MAX_BULK_CLIENTS, description="clients of this type")
    name_prefix: str = Field("client-", min_length=1, max_length=100)
    task: TaskName = Field(
        DEFAULT_TASK,
        description="the task its clients take part in (stored and not retired; issue 36)",
    )


class BulkRegistration(Schema):
    """An operator's registration of many clients by type, each wallet funded with ``deposit``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [  # one task's fleet, and two tasks' at once
                {"types": [BULK_TYPE_EXAMPLE], "deposit": "10.000000"},
                {"types": [BULK_TYPE_EXAMPLE, BULK_TASK_TYPE_EXAMPLE], "deposit": "10.000000"},
            ]
        },
    )

    types: list[BulkType] = Field(..., min_length=1, max_length=64)
    deposit: BoundedMoney = Field(Decimal(0), description="paid into each wallet")

    @model_validator(mode="after")
    def _at_most_max(self) -> BulkRegistration:
        total = sum(t.count for t in self.types)
        if total > MAX_BULK_CLIENTS:
            raise ValueError(f"types: at most {MAX_BULK_CLIENTS} clients per call, got {total}")
        return self


class BulkRegistered(Schema):
    """The clients a bulk registration made, in order, each with its token (shown once)."""

    clients: list[RegisteredClient]


class ClientOut(OfTask):
    """A registered client as the market shows it."""

    model_config = example(
        {
            "id": 7,
            "name": "pi-07",
            "type_name": "type-1",
            "data_size": 50,
            "cost": "0.500000",
            "node_key_sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
            "task": "fashion-mnist",
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


class TokenOut(Schema):
    """A client's new bearer token (rotated or reissued; the previous one is revoked), shown once."""

    model_config = example(
        {"client_id": 7, "token": TOKEN_EXAMPLE, "expires_at": "2026-11-26T16:05:05Z"}
    )

    client_id: int
    token: str
    expires_at: Timestamp = Field(..., description="when the token expires (RFC 3339, UTC)")


class TypeQuote(Schema):
    """The published terms for one type: reward r_i and the target numbers K*_i, B*_i."""

    model_config = example(
        {"type_name": "type-3", "reward": "2.250000", "target_participants": 5, "target_buyers": 0}
    )

    type_name: str
    reward: Money
    target_participants: int
    target_buyers: int


class QuoteOut(Schema):
    """The current round's published quote: price p, rewards r_i, predicted ε and welfare; what is
    on sale now and when the next round opens."""

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
            "on_sale": [ON_SALE_EXAMPLE],
            "next_round": "round 3 is open now (collecting)",
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
    on_sale: list[OnSale] = Field(default_factory=list, description=ON_SALE_DESCRIPTION)
    next_round: str = Field(NOT_SCHEDULED, description=NEXT_ROUND_DESCRIPTION)


class DecisionIn(Schema):
    """A strategy declaration for the open round."""

    model_config = example({"strategy": "buy"})

    strategy: Strategy


class DecisionOut(Schema):
    """A client's recorded strategy in a round."""

    model_config = example({"round_id": 3, "client_id": 7, "strategy": "buy", "paid": True})

    round_id: int
    client_id: int
    strategy: Strategy
    paid: bool


class PurchaseIn(Schema):
    """Buy the model of a round at the round's quoted price."""

    model_config = example({"round_id": 3})

    round_id: Id


class PurchaseOut(Schema):
    """A completed purchase: the price paid, its ledger transaction and the buyer's new balance."""

    model_config = example(
        {
            "purchase_id": 12,
            "round_id": 3,
            "client_id": 7,
            "price": "0.750000",
            "transaction_id": 41,
            "balance": "9.250000",
            "late": False,
        }
    )

    purchase_id: int
    round_id: int
    client_id: int
    price: Money
    transaction_id: int | None = Field(..., description="absent when the price is zero")
    balance: Money
    late: bool = Field(False, description=LATE_PURCHASE_DESCRIPTION)


class PurchaseRecord(Schema):
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


class DepositIn(Schema):
    """Operator credit of a client's wallet (money received outside the platform)."""

    model_config = example({"client_id": 7, "amount": "10.000000"})

    client_id: Id
    amount: PositiveMoney


class DepositOut(Schema):
    """A recorded deposit."""

    model_config = example(
        {"transaction_id": 8, "client_id": 7, "amount": "10.000000", "balance": "10.000000"}
    )

    transaction_id: int
    client_id: int
    amount: Money
    balance: Money
    replayed: bool = Field(False, description="the stored answer to a repeated Idempotency-Key")


class EntryOut(Schema):
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


class TransactionEntry(Schema):
    """One leg of a ledger transaction: an account and its signed amount."""

    model_config = example({"account": "wallet:7", "amount": "-0.750000"})

    account: str
    amount: Money


class TransactionOut(Schema):
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


class AccountOut(Schema):
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


class BalanceOut(Schema):
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


class ModelKey(Schema):
    """The public half of the key the market signs its models with (``GET
    /.well-known/mots-model-key``, no token): a buyer saves it once and checks every model file
    offline (``mots model verify``)."""

    model_config = example(
        {
            "algorithm": "ed25519",
            "public_key": "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
            "key_id": "3a7bd3e2360a3d29",
        }
    )

    algorithm: str = Field(..., description="the signature scheme (ed25519)")
    public_key: str = Field(..., description="the raw 32-byte public key, base64")
    key_id: str = Field(..., description="the key's id, as a signed model's sidecar names it")


class ModelInfo(Schema):
    """A published round's model file: its digest, size and the metadata written beside it
    (``GET /v1/rounds/{id}/model/info``; the client saves it as ``mots-round-N.json``)."""

    model_config = example(
        {
            "round_id": 3,
            "file": "mots-round-3.pt2",
            "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "size": 431517,
            "format": "mots-model/2",
            "participants": [0, 0, 5],
            "epsilon": 0.341,
            "metadata": {"dataset": "fashion-mnist", "fedavg_rounds": 5},
        }
    )

    round_id: int = Field(..., description="the market round that produced the model")
    file: str = Field(..., description="the file name a download gets: mots-round-N.pt2")
    sha256: str = Field(..., description="hex SHA-256 of the file, as X-Model-SHA256 sends it")
    size: int = Field(..., description="bytes")
    format: str | None = Field(
        ..., description="the file's format tag (mots-model/2; mots-model/1 before issue 40)"
    )
    participants: list[int] | None = Field(..., description="the coalition K: trainers per type")
    epsilon: float | None = Field(..., description="the training's test loss ε of the model")
    metadata: dict[str, Any] = Field(
        ...,
        description="everything the trainer recorded (data set, model, FedAvg rounds, …)",
    )
    price: Money | None = Field(None, description="the price the round sold at (p)")
    signature: str | None = Field(None, description="the market's ed25519 signature (base64)")
    key_id: str | None = Field(None, description="its key: /.well-known/mots-model-key")


class LedgerCheck(Schema):
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
    total: QuotedMoney = Field(description="Σ of every balance (0 when the ledger balances)")
    accounts: dict[str, QuotedMoney] = Field(
        description="Σ balance per category: each account is within ±MAX_BALANCE_MICROS, a "
        "category's sum may hold more digits than one account's Money"
    )

    @property
    def balanced(self) -> bool:
        """True when no invariant is broken."""
        return (
            self.unbalanced_transactions == 0 and self.mismatched_accounts == 0 and self.total == 0
        )
