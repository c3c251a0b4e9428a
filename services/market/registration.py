"""Registering clients set-based: many clients, their wallets and an initial deposit each in one
write (one statement on PostgreSQL), whatever their number.

The operator's bulk route (``POST /v1/clients/bulk``) registers a fleet by type: the operator
attests each type's (D_i, C_i), as it does when it enrols a device. Every client of one type
declares the same data size and cost (checked against the registered clients with one
``LIMIT 1`` lookup per type, not per client).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from mots.platform.db import BatchWrite, reserve_ids
from services.market import enrolment as enrolments
from services.market import ledger
from services.market.auth import hash_token
from services.market.enrolment import TypeFacts
from services.market.errors import BadEnrolmentCode, CodeUsedUp, Conflict, Refusal
from services.market.models import (
    DEFAULT_TASK,
    Account,
    Base,
    Client,
    Enrolment,
    Entry,
    LedgerTransaction,
)

_CLIENTS = Base.metadata.tables[Client.__tablename__]
_ACCOUNTS = Base.metadata.tables[Account.__tablename__]
_TRANSACTIONS = Base.metadata.tables[LedgerTransaction.__tablename__]
_ENTRIES = Base.metadata.tables[Entry.__tablename__]
_ENROLMENTS = Base.metadata.tables[Enrolment.__tablename__]


class TypeMismatch(Refusal):
    """A type declared with another data size or cost than its registered clients'."""


@dataclass(frozen=True, slots=True)
class NewClient:
    """A client to register: its name and type declaration (cost in micro-units)."""

    name: str
    type_name: str
    data_size: int
    cost_micros: int
    enrolment_id: int | None = None
    task: str = DEFAULT_TASK


@dataclass(frozen=True, slots=True)
class Enrolled:
    """One ``POST /v1/clients`` with an enrolment code: the name, the code and the type fields
    the body claims (None: not claimed; each must equal the code's)."""

    name: str
    code: str
    type_name: str | None = None
    data_size: int | None = None
    cost_micros: int | None = None
    task: str | None = None


@dataclass(frozen=True, slots=True)
class Registered:
    """A registered client: its id and the token shown once, with the token's expiry."""

    id: int
    client: NewClient
    token: str
    token_expires_at: int


def check_types(session: Session, clients: Sequence[NewClient], max_types: int) -> None:
    """Every type's (D_i, C_i) the same within ``clients`` (else :class:`TypeMismatch`) and as
    its live clients' and enrolments' (else a 409 :class:`Conflict`, as a single registration
    is refused), and no more than ``max_types`` types in the market."""
    declared: dict[tuple[str, str], tuple[int, int]] = {}  # (task, type) → (D_i, C_i)
    for c in clients:
        seen = declared.setdefault((c.task, c.type_name), (c.data_size, c.cost_micros))
        if seen != (c.data_size, c.cost_micros):
            raise TypeMismatch(
                "type_name", f"type {c.type_name!r} is declared twice with different sizes or costs"
            )
    now = int(time.time())
    new = [  # a lookup per type, not per client; each task has its own types (issue 36)
        name
        for (task, name), (size, cost) in declared.items()
        if not enrolments.check_type(session, TypeFacts(name, size, cost, task), max_types, now)
    ]
    if len(new) < 2:  # none new, or one that check_type counted: no scan of the clients
        return
    # check_type counts the types already there; several new ones in one call must fit together
    live = select(Client.type_name).where(Client.status.in_(enrolments.LIVE_CLIENT_STATES))
    enrolled = select(Enrolment.type_name).where(
        Enrolment.revoked.is_(False), Enrolment.expires_at > now
    )
    known = set(session.scalars(live.distinct())) | set(session.scalars(enrolled.distinct()))
    if len(known) + len(new) > max_types:
        raise Conflict(
            "type_name",
            f"{len(new)} new types {sorted(new)} would make {len(known) + len(new)} distinct "
            f"types; the market allows {max_types} (MOTS_MAX_TYPES)",
        )


def _queue_deposits(
    writes: BatchWrite,
    conn: Connection,
    client_ids: Sequence[int],
    wallet_ids: Sequence[int],
    external: int,
    deposit_micros: int,
    now: datetime,
) -> None:
    """Queue one deposit transaction per new client: ``deposit_micros`` from ``external`` into
    its wallet (the wallets' balances are inserted already holding it), double-entry."""
    txn_ids = reserve_ids(conn, _TRANSACTIONS, len(client_ids))
    writes.insert(
        _TRANSACTIONS,
        [
            {"id": t, "kind": "deposit", "round_id": None, "client_id": i, "created_at": now}
            for t, i in zip(txn_ids, client_ids, strict=True)
        ],
    )
    writes.insert(
        _ENTRIES,
        [
            {"transaction_id": t, "account_id": acc, "amount_micros": amount}
            for t, w in zip(txn_ids, wallet_ids, strict=True)
            for acc, amount in ((external, -deposit_micros), (w, deposit_micros))
        ],
    )
    writes.add(_ACCOUNTS, "id", "balance_micros", {external: -deposit_micros * len(client_ids)})


def register_clients(
    session: Session,
    clients: Sequence[NewClient],
    deposit_micros: int,
    max_types: int,
    token_for: Callable[[int], tuple[str, int]],
) -> list[Registered]:
    """Register ``clients`` (types checked first), each with a wallet holding ``deposit_micros``
    paid in from ``external:deposits`` as one deposit transaction per client. Statements: a
    lookup per type, id reservations, and one write of every row. ``token_for(client_id)`` signs
    a client's token and gives its expiry (:func:`services.market.auth.issue_token`); only the
    tokens' hashes are stored. The caller commits."""
    if deposit_micros < 0:
        raise ValueError("deposit_micros: a deposit is not negative")
    check_types(session, clients, max_types)
    if not clients:
        return []
    conn = session.connection()
    external = 0
    if deposit_micros:  # before the ids are reserved; no lock on it when nothing is paid in
        external = ledger.ensure_account(session, ledger.EXTERNAL)
        ledger.lock_accounts(session, [external])
        ledger.guard_balances(conn, {external: -deposit_micros * len(clients)})
    n = len(clients)
    client_ids = reserve_ids(conn, _CLIENTS, n)
    wallet_ids = reserve_ids(conn, _ACCOUNTS, n)
    issued = [token_for(i) for i in client_ids]
    tokens = [t for t, _ in issued]
    now = datetime.now(UTC)
    writes = BatchWrite()
    writes.insert(
        _CLIENTS,
        [
            {
                "id": i,
                "name": c.name,
                "type_name": c.type_name,
                "data_size": c.data_size,
                "cost_micros": c.cost_micros,
                "token_hash": hash_token(t),
                "enrolment_id": c.enrolment_id,
                "created_at": now,
                "task": c.task,
            }
            for i, c, t in zip(client_ids, clients, tokens, strict=True)
        ],
    )
    writes.insert(
        _ACCOUNTS,
        [
            {
                "id": w,
                "name": ledger.wallet_name(i),
                "category": "wallets",
                "client_id": i,
                "balance_micros": deposit_micros,
            }
            for w, i in zip(wallet_ids, client_ids, strict=True)
        ],
    )
    if deposit_micros:
        _queue_deposits(writes, conn, client_ids, wallet_ids, external, deposit_micros, now)
    writes.flush(conn)
    return [
        Registered(i, c, t, expires)
        for i, c, (t, expires) in zip(client_ids, clients, issued, strict=True)
    ]


def register_enrolled(
    session: Session,
    requests: Sequence[Enrolled],
    max_types: int,
    token_for: Callable[[int], tuple[str, int]],
) -> list[Registered | Refusal]:
    """Register ``requests`` (each redeeming one use of its enrolment code) in the caller's
    transaction, as if one after another, with a fixed number of statements whatever their
    number: the codes' rows locked (one read), the clients and wallets written
    (:func:`register_clients`, no deposit) and the codes' uses taken (one write). An unknown,
    expired, revoked or used-up code is refused 401 (:func:`enrolment.redeem`'s answer), a claimed
    type field that differs from the code's 409; the others are registered. The caller commits."""
    now = int(time.time())
    digests = [hash_token(r.code) for r in requests]
    rows = {
        e.code_hash: e
        for e in session.scalars(
            select(Enrolment)
            .where(
                Enrolment.code_hash.in_(sorted(set(digests))),
                Enrolment.revoked.is_(False),
                Enrolment.expires_at > now,
            )
            .order_by(Enrolment.id)  # locked in one order by every batch: no deadlock
            .with_for_update()
        )
    }
    left = {d: e.uses_left for d, e in rows.items()}
    outcomes: list[NewClient | Refusal] = []
    for r, digest in zip(requests, digests, strict=True):
        e = rows.get(digest)
        if e is None or left[digest] <= 0:
            refused = BadEnrolmentCode if e is None else CodeUsedUp
            outcomes.append(
                refused(
                    "enrolment_code",
                    "unknown, expired, revoked or used up; ask the operator for a code",
                )
            )
            continue
        facts = TypeFacts(e.type_name, e.data_size, e.cost_micros, e.task)
        refusal = enrolments.claim_conflict(facts, r.type_name, r.data_size, r.cost_micros)
        if refusal is None and r.task is not None and r.task != e.task:
            refusal = Conflict("task", f"the enrolment code enrols into task {e.task!r}")
        if refusal is not None:
            outcomes.append(refusal)
            continue
        left[digest] -= 1
        outcomes.append(NewClient(r.name, e.type_name, e.data_size, e.cost_micros, e.id, e.task))
    new = [o for o in outcomes if isinstance(o, NewClient)]
    done = iter(register_clients(session, new, 0, max_types, token_for))
    taken = {rows[d].id: left[d] - rows[d].uses_left for d in left if left[d] != rows[d].uses_left}
    session.flush()
    writes = BatchWrite()
    writes.add(_ENROLMENTS, "id", "uses_left", taken)
    writes.flush(session.connection())
    return [next(done) if isinstance(o, NewClient) else o for o in outcomes]
