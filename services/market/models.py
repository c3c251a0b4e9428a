"""Tables of the market: clients, the double-entry ledger, rounds, decisions, purchases, idempotency.

Amounts are BIGINT micro-units (:mod:`mots.platform.money`): exact on SQLite and PostgreSQL alike.
Every ledger transaction's entries sum to zero; ``accounts.balance_micros`` is the running sum
of an account's entries, updated in the same database transaction as the entries.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mots.platform.api.tasks import DEFAULT_TASK as DEFAULT_TASK


def _now() -> datetime:
    return datetime.now(UTC)


def _task_column() -> Mapped[str]:
    """The task a row belongs to (issue 36), ``fashion-mnist`` unless written otherwise."""
    return mapped_column(String(64), default=DEFAULT_TASK, server_default=DEFAULT_TASK)


class Base(DeclarativeBase):
    """Declarative base of the market's tables."""


class Client(Base):
    """A registered participant or buyer with its type declaration and hashed credential."""

    __tablename__ = "clients"
    __table_args__ = (
        # one device (its SuperNode key) is at most one client per task (migration 0012)
        UniqueConstraint("task", "node_key_sha256", name="uq_clients_task_node_key_sha256"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    type_name: Mapped[str] = mapped_column(String(64), index=True)
    data_size: Mapped[int] = mapped_column(Integer)
    cost_micros: Mapped[int] = mapped_column(BigInteger)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    node_public_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    node_key_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="active", server_default="active")
    """``active`` (attested: priced, may declare and buy), ``pending`` (self-registered, awaiting
    the operator's approval), ``revoked`` (removed by the operator) or ``left`` (left by itself,
    ``DELETE /v1/me``: not priced, reads its wallet and models)."""
    enrolment_id: Mapped[int | None] = mapped_column(ForeignKey("enrolments.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    task: Mapped[str] = _task_column()
    """The task it takes part in (its enrolment code's): it declares, joins and downloads there
    only; its wallet pays for any task (one ledger)."""


class Enrolment(Base):
    """An operator-attested type (D_i, C_i) with a code that devices redeem at registration.

    Only the code's SHA-256 is stored; ``uses_left`` counts the registrations it still admits and
    ``expires_at`` (Unix seconds) ends it, as does revocation.
    """

    __tablename__ = "enrolments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    type_name: Mapped[str] = mapped_column(String(64))
    data_size: Mapped[int] = mapped_column(Integer)
    cost_micros: Mapped[int] = mapped_column(BigInteger)
    uses_left: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[int] = mapped_column(BigInteger)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    task: Mapped[str] = _task_column()
    """The task the code enrols devices into."""


class Task(Base):
    """One version of a task the market trains and sells (issue 36): the task file's text as the
    operator sent it and its validated form (:mod:`mots.tasks.task_file`)."""

    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="active", server_default="active")
    """``active`` or ``retired`` (the task's every version: no new enrolment codes or rounds)."""
    content: Mapped[str] = mapped_column(Text)
    spec_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class Account(Base):
    """A ledger account: ``wallet:<client>``, ``round:<id>:pool``, ``platform:subsidy``, ..."""

    __tablename__ = "accounts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    category: Mapped[str] = mapped_column(String(32), index=True)
    client_id: Mapped[int | None] = mapped_column(ForeignKey("clients.id"), nullable=True)
    balance_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    task: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """A round pool's task (its round's); None for the accounts of no task: wallets, the
    platform's (one ledger across tasks)."""


class LedgerTransaction(Base):
    """One money movement; its entries sum to zero (double entry)."""

    __tablename__ = "ledger_transactions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    round_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    client_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class Entry(Base):
    """A signed amount on one account within a transaction."""

    __tablename__ = "ledger_entries"
    __table_args__ = (Index("ix_ledger_entries_account", "account_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    transaction_id: Mapped[int] = mapped_column(ForeignKey("ledger_transactions.id"), index=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"))
    amount_micros: Mapped[int] = mapped_column(BigInteger)


class MarketRound(Base):
    """The market's view of a round: its published quote and whether it still takes decisions."""

    __tablename__ = "market_rounds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    state: Mapped[str] = mapped_column(String(16))
    """A :class:`~mots.platform.api.base.RoundState` value (the market stores collecting, training, settling, settled_by_rule, published)."""
    mechanism: Mapped[str] = mapped_column(String(64))
    price_micros: Mapped[int] = mapped_column(BigInteger)
    quote_json: Mapped[str] = mapped_column(Text)
    settlement_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    artifact_path: Mapped[str | None] = mapped_column(String(512), nullable=True)
    artifact_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    opened_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    population: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Clients registered when the round opened: it is fully declared once its tallies reach it."""
    task: Mapped[str] = _task_column()
    """The task it trains: its quote, members, declarations, purchases and model are that task's."""


class RoundMember(Base):
    """A client in a round's population: snapshotted when the round is priced
    (``market.population``, before the round opens here, hence no reference to market_rounds),
    less those no longer active when it opens; only members may declare and buy in it. A client
    registered or approved later takes part from the next round. The market is the one owner of
    a round's membership (issue 25); the rows are kept until the round is settled (the trainer
    asks for the members' SuperNode keys by round)."""

    __tablename__ = "round_members"

    round_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"), primary_key=True)


class RoundTally(Base):
    """How many clients have declared in a round, one counter per shard (summed when read).

    Batches of declarations or purchases booked side by side add to different shards, so they
    do not queue on one row; "everyone declared" reads :data:`~services.market.ledger.POOL_SHARDS`
    rows whatever the population.
    """

    __tablename__ = "round_tallies"

    round_id: Mapped[int] = mapped_column(ForeignKey("market_rounds.id"), primary_key=True)
    shard: Mapped[int] = mapped_column(Integer, primary_key=True)
    declared: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class Decision(Base):
    """A client's strategy in a round (one row per client and round)."""

    __tablename__ = "decisions"
    __table_args__ = (UniqueConstraint("round_id", "client_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("market_rounds.id"))
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"))
    strategy: Mapped[str] = mapped_column(String(16))
    dropped: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    task: Mapped[str] = _task_column()
    """Its round's task."""


class Purchase(Base):
    """A paid purchase of a round's model; one per client and round."""

    __tablename__ = "purchases"
    __table_args__ = (UniqueConstraint("round_id", "client_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("market_rounds.id"))
    client_id: Mapped[int] = mapped_column(ForeignKey("clients.id"))
    price_micros: Mapped[int] = mapped_column(BigInteger)
    transaction_id: Mapped[int | None] = mapped_column(
        ForeignKey("ledger_transactions.id"), nullable=True
    )
    refunded: Mapped[bool] = mapped_column(Boolean, default=False)
    task: Mapped[str] = _task_column()
    """Its round's task."""


class IdempotencyKey(Base):
    """The stored outcome of a money-moving call, keyed by caller and Idempotency-Key."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("principal", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal: Mapped[str] = mapped_column(String(32))
    key: Mapped[str] = mapped_column(String(128))
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column(Integer)
    response_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class RevokedToken(Base):
    """A client token the market replaced (rotated, revoked, its client revoked), kept until it
    would have expired anyway: the durable copy of the revocation list every service reads from
    Redis (:mod:`mots.platform.revocation`), published again at each start of the market."""

    __tablename__ = "revoked_tokens"

    verifier: Mapped[str] = mapped_column(String(64), primary_key=True)
    reason: Mapped[str] = mapped_column(String(16))
    until: Mapped[int] = mapped_column(BigInteger, index=True)
    """Unix seconds after which the token is expired anyway (the row is pruned then)."""
