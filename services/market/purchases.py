"""Buying a round's model: the buyer's wallet pays the quoted price into the round's pool.

Purchases are booked in batches (:mod:`services.market.booking` collects the requests in
flight): :func:`book_purchases` decides and books a whole batch in one database transaction with
a fixed number of statements, whatever the batch's size. Each request gets the outcome it would
have had alone, in the batch's order: the stored result of its Idempotency-Key (replay), 404, 409
(round not collecting, already bought, key reused with another body), 402, or 201 with two ledger
entries (wallet −p, a shard of the round's pool +p), a ``purchases`` row, a buy decision and the
key's stored result. Core statements, no ORM objects: this is the market's hottest path.

Late sales (issue 40): once a round is published its model stays on sale at the round's price
p*, to anyone but its trainers (who have it); the money goes wallet → ``platform:subsidy`` in a
``late_purchase`` transaction and no decision is written, so the round's settlement, its pool
and its figures stay as they were. Why p* and the subsidy account keep SWAN's equilibrium and
budget: docs/mechanisms.md §7.3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import String, and_, cast, literal_column, or_, select, union_all
from sqlalchemy.orm import Session

from mots.platform.api.base import RoundState, Strategy
from mots.platform.api.market import PurchaseOut
from mots.platform.db import BatchWrite, one_of, one_of_select, reserve_ids
from mots.platform.money import from_micros
from services.market import idempotency, ledger
from services.market.decisions import not_a_member, queue_decisions
from services.market.errors import Conflict, NotFound, PaymentRequired, Refusal, Unauthorized
from services.market.models import (
    DEFAULT_TASK,
    Account,
    Base,
    Client,
    Decision,
    LedgerTransaction,
    MarketRound,
    Purchase,
    RoundMember,
)

OPEN_FOR_PURCHASE = {RoundState.COLLECTING}
LATE_SALE = {RoundState.PUBLISHED}
"""States whose model is sold after the round, at the round's price (docs/mechanisms.md §7.3)."""
LATE_KIND = "late_purchase"
"""The ledger kind of a late sale: wallet → :data:`ledger.SUBSIDY`."""
NO_MODEL = {RoundState.FAILED, RoundState.SETTLED_BY_RULE}
PATH = "/v1/purchases"

_ROUNDS = Base.metadata.tables[MarketRound.__tablename__]
_ACCOUNTS = Base.metadata.tables[Account.__tablename__]
_PURCHASES = Base.metadata.tables[Purchase.__tablename__]
_CLIENTS = Base.metadata.tables[Client.__tablename__]
_TRANSACTIONS = Base.metadata.tables[LedgerTransaction.__tablename__]
_MEMBERS = Base.metadata.tables[RoundMember.__tablename__]
_DECISIONS = Base.metadata.tables[Decision.__tablename__]
BOUGHT, TRAINED = "bought", "trained"


@dataclass(frozen=True, slots=True)
class PurchaseRequest:
    """One ``POST /v1/purchases``: who buys which round, under which Idempotency-Key."""

    client_id: int | None  # None: not yet known, resolved from ``verifier`` in the batch
    round_id: int
    key: str
    fingerprint: str  # idempotency.request_hash of the request
    verifier: str = ""  # the bearer token's stored verifier (auth.hash_token)


@dataclass(frozen=True, slots=True)
class _Buy:
    """A purchase request whose caller is known (client id resolved from the token)."""

    client_id: int
    round_id: int
    key: str
    fingerprint: str

    @property
    def principal(self) -> str:
        """The idempotency principal of the buyer."""
        return principal_of(self.client_id)


def principal_of(client_id: int) -> str:
    """A client's idempotency principal: its keys are its own (another's key is another key)."""
    return f"client:{client_id}"


CREATED = 201
"""The status of a booked purchase (and of its stored Idempotency-Key result)."""

Outcome = tuple[int, dict[str, Any]] | Refusal
"""A request's answer: (status code, JSON body), or the refusal (a domain error) that refuses it."""


@dataclass
class BookedBatch:
    """What one batch did: an outcome per request, and the rounds it booked purchases in."""

    outcomes: list[Outcome]
    booked: int
    rounds_booked: list[int]
    booked_tasks: list[str] = field(default_factory=list)  # each booking's round's task (issue 36)


class BatchReads(NamedTuple):
    """A batch's reads, defined once and compiled for each database: executed one by one on a
    session (:func:`book_purchases`) and prepared once per connection, all sent in one exchange
    (:mod:`services.market.purchases_pg`). In this order, each seeing what committed before it.

    Their list parameters: ``verifiers`` (tokens of callers not known yet), ``client_ids``
    (callers known), ``round_ids``, ``keys`` (Idempotency-Keys), ``names`` (accounts). "The
    callers" are the clients of those tokens or ids, found inside each statement, so that no read
    waits on another's answer.
    """

    callers: Any  # (token verifier, client id) of the active callers
    rounds: Any  # (id, state, price, artifact path) with shared locks
    wallets: Any  # (client id, account id, balance) of the callers' wallets, locked
    stored_keys: Any  # the callers' stored Idempotency-Keys among ``keys``
    bought: Any  # (round id, client id, BOUGHT | TRAINED): the callers' purchases and trainings
    members: Any  # (round id, client id) of the callers in the rounds' populations
    accounts: Any  # (name, id) of the accounts ``names``


def _callers_as(prefix: str, dialect: str) -> Any:
    """The callers' ids (``prefix`` ''), or the names built from them: ``'wallet:' || id`` is
    :func:`ledger.wallet_name`, ``'client:' || id`` :func:`principal_of`."""
    column: Any = _CLIENTS.c.id
    if prefix:
        column = literal_column(f"'{prefix}'") + cast(_CLIENTS.c.id, String)
    return select(column).where(
        or_(
            one_of(_CLIENTS.c.token_hash, "verifiers", dialect),
            one_of(_CLIENTS.c.id, "client_ids", dialect),
        )
    )


@lru_cache(maxsize=4)
def batch_reads(dialect: str) -> BatchReads:
    """The statements, with list parameters (:func:`~mots.platform.db.one_of`), built once."""
    return BatchReads(
        callers=select(_CLIENTS.c.token_hash, _CLIENTS.c.id).where(
            or_(
                and_(
                    one_of(_CLIENTS.c.token_hash, "verifiers", dialect),
                    _CLIENTS.c.status == literal_column("'active'"),
                ),
                one_of(_CLIENTS.c.id, "client_ids", dialect),
            )
        ),
        # FOR SHARE: purchases run side by side, but close_round's FOR UPDATE waits for them (and
        # they for it), so no purchase lands in a round after it closed. (SQLite: BEGIN
        # IMMEDIATE serialises.)
        rounds=select(*(_ROUNDS.c[n] for n in ("id", "state", "price_micros", "artifact_path")))
        .add_columns(_ROUNDS.c.task)
        .where(one_of(_ROUNDS.c.id, "round_ids", dialect))
        .with_for_update(read=True),
        # The buyers' wallets, locked in ascending id order so that two batches never deadlock
        # on them. Everything read after this lock (keys, purchases) sees any twin request that
        # committed first.
        wallets=select(_ACCOUNTS.c.client_id, _ACCOUNTS.c.id, _ACCOUNTS.c.balance_micros)
        .where(one_of_select(_ACCOUNTS.c.name, _callers_as("wallet:", dialect), dialect))
        .order_by(_ACCOUNTS.c.id)
        .with_for_update(),
        stored_keys=idempotency.stored_keys(dialect, _callers_as("client:", dialect)),
        # What the callers already have of the rounds: bought, or trained (a join not dropped,
        # which only a published round's late sale refuses).
        bought=union_all(
            select(
                _PURCHASES.c.round_id, _PURCHASES.c.client_id, literal_column(f"'{BOUGHT}'")
            ).where(
                one_of(_PURCHASES.c.round_id, "round_ids", dialect),
                one_of_select(_PURCHASES.c.client_id, _callers_as("", dialect), dialect),
            ),
            select(
                _DECISIONS.c.round_id, _DECISIONS.c.client_id, literal_column(f"'{TRAINED}'")
            ).where(
                one_of(_DECISIONS.c.round_id, "round_ids", dialect),
                one_of_select(_DECISIONS.c.client_id, _callers_as("", dialect), dialect),
                _DECISIONS.c.strategy == literal_column("'join'"),
                _DECISIONS.c.dropped.is_(False),
            ),
        ),
        members=select(_MEMBERS.c.round_id, _MEMBERS.c.client_id).where(
            one_of(_MEMBERS.c.round_id, "round_ids", dialect),
            one_of_select(_MEMBERS.c.client_id, _callers_as("", dialect), dialect),
        ),
        accounts=select(_ACCOUNTS.c.name, _ACCOUNTS.c.id).where(
            one_of(_ACCOUNTS.c.name, "names", dialect)
        ),
    )


@dataclass(slots=True)
class BatchView:
    """What a batch's reads found, under the locks its decisions need.

    Read in this order (each read sees what committed before it): the rounds (shared locks), the
    buyers' wallets (locked: a twin request that committed first is seen by everything after),
    the stored Idempotency-Keys and the purchases already made.
    """

    client_of: dict[str, int]  # token verifier → client id, for the callers not known yet
    rounds: dict[int, tuple[str, int]]  # round id → (state, price in micros)
    wallets: dict[int, tuple[int, int]]  # client id → (wallet account id, balance in micros)
    stored: dict[tuple[str, str], tuple[str, int, str]]  # (principal, key) → (hash, code, JSON)
    bought: set[tuple[int, int]]  # (round id, client id) already bought
    members: set[tuple[int, int]] | None = None  # (round id, client id) in its population
    trained: set[tuple[int, int]] = field(default_factory=set)  # (round id, client id) joined
    gone: set[int] = field(default_factory=set)  # published rounds whose model file is gone
    tasks: dict[int, str] = field(default_factory=dict)  # round id → its task


def gone_models(rows: Any) -> set[int]:
    """The published rounds among the ``rounds`` read's rows whose model file is no longer kept
    (artifact retention removed it): not on sale (one stat per published round in the batch)."""
    return {r[0] for r in rows if r[1] in LATE_SALE and not (r[3] and Path(r[3]).is_file())}


def split_bought(
    rows: Any,
) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """The ``bought`` read's rows as (bought, trained) sets of (round id, client id)."""
    bought: set[tuple[int, int]] = set()
    trained: set[tuple[int, int]] = set()
    for round_id, client_id, what in rows:
        (bought if what == BOUGHT else trained).add((round_id, client_id))
    return bought, trained


@dataclass(slots=True)
class Verdict:
    """A batch decided (no I/O yet): each request's outcome, or its place among the bookings."""

    todo: list[_Buy]  # the requests with their callers resolved (client 0: refused with 401)
    outcomes: list[Outcome | None]  # None: booked (filled in once written) or an alias
    accepted: list[int]  # indices of the requests to book, in order
    left: list[int]  # per accepted request: its buyer's balance after it
    aliases: dict[int, int]  # index → index whose outcome it repeats (same key, same body)

    def buys(self) -> list[_Buy]:
        """The accepted requests, in order."""
        return [self.todo[i] for i in self.accepted]


def resolve_callers(
    requests: Sequence[PurchaseRequest], client_of: dict[str, int], outcomes: list[Outcome | None]
) -> list[_Buy]:
    """The requests with every caller's client id filled in; 401 outcomes for unknown tokens.

    A refused request stays in the list (as client 0, which no client is) so indices match.
    """
    out = []
    for i, r in enumerate(requests):
        client_id = r.client_id if r.client_id is not None else client_of.get(r.verifier)
        if client_id is None:
            outcomes[i] = Unauthorized("Authorization", "the token is not a registered client's")
        out.append(_Buy(client_id or 0, r.round_id, r.key, r.fingerprint))
    return out


def decide(requests: Sequence[PurchaseRequest], view: BatchView) -> Verdict:
    """Each request's answer as if the batch's requests came one after another (pure).

    In order: 401 (unknown token), the stored result of a replayed key (409 if its body
    differs), a repeat of a key booked earlier in the batch, 404 (no such round), 409 (round
    neither collecting nor published); for a published round (a late sale) 409 when its model
    file is gone or the caller trained it, else for a collecting one 403 (not in the round's
    population: registered or approved after it opened); 409 (already bought, in the batch
    included), 402 (balance below the price), else booked at the round's price, the balance
    carried to the buyer's next request.
    """
    outcomes: list[Outcome | None] = [None] * len(requests)
    todo = resolve_callers(requests, view.client_of, outcomes)
    balances = {c: wallet[1] for c, wallet in view.wallets.items()}
    bought = set(view.bought)
    accepted: list[int] = []
    left: list[int] = []
    booked_keys: dict[tuple[str, str], int] = {}  # (principal, key) → index of its booking
    aliases: dict[int, int] = {}
    for i, req in enumerate(todo):
        if outcomes[i] is not None:  # refused already (unknown token)
            continue
        pair = (req.principal, req.key)
        if pair in view.stored:
            outcomes[i] = idempotency.replayed(view.stored[pair], req.fingerprint)
            continue
        if pair in booked_keys:
            first = booked_keys[pair]
            if todo[first].fingerprint == req.fingerprint:
                aliases[i] = first
            else:
                outcomes[i] = idempotency.key_reused()
            continue
        found = view.rounds.get(req.round_id)
        if found is None:
            outcomes[i] = NotFound("round_id", f"round {req.round_id} does not exist")
            continue
        state, price = found
        late = state in LATE_SALE
        if state not in OPEN_FOR_PURCHASE and not late:
            outcomes[i] = not_on_sale(req.round_id, state)
        elif late and req.round_id in view.gone:
            outcomes[i] = Conflict(
                "round_id",
                f"round {req.round_id}'s model is no longer kept (artifact retention), so it is"
                " not on sale",
            )
        elif late and (req.round_id, req.client_id) in view.trained:
            outcomes[i] = Conflict(
                "round_id",
                f"client {req.client_id} trained round {req.round_id}: its model is the"
                f" client's already (GET /v1/rounds/{req.round_id}/model)",
            )
        elif (
            not late
            and view.members is not None
            and (req.round_id, req.client_id) not in view.members
        ):
            outcomes[i] = not_a_member(req.client_id, req.round_id)
        elif (req.round_id, req.client_id) in bought:
            outcomes[i] = Conflict(
                "round_id", f"client {req.client_id} already bought round {req.round_id}"
            )
        elif balances[req.client_id] < price:
            outcomes[i] = PaymentRequired(
                "balance",
                f"{from_micros(balances[req.client_id])} is below the price {from_micros(price)}",
            )
        else:
            balances[req.client_id] -= price
            bought.add((req.round_id, req.client_id))
            booked_keys[pair] = i
            accepted.append(i)
            left.append(balances[req.client_id])
    return Verdict(todo, outcomes, accepted, left, aliases)


def not_on_sale(round_id: int, state: str) -> Conflict:
    """The 409 of a round whose model is not on sale: when it will be, or that it never will."""
    if state in NO_MODEL:
        why = "it published no model (its buyers were refunded), so there is nothing to buy"
    elif state == RoundState.OPEN:
        why = "purchases open when it starts collecting (GET /v1/quote)"
    else:
        why = (
            "its model is on sale once it is published, at the round's price"
            " (GET /v1/quote lists what is on sale now)"
        )
    return Conflict("round_id", f"round {round_id} is {state}; {why}")


def is_late(view: BatchView, round_id: int) -> bool:
    """Whether a purchase of ``round_id`` is a late sale (its round published)."""
    return view.rounds[round_id][0] in LATE_SALE


def shard_names(requests: Sequence[PurchaseRequest | _Buy], shard: int) -> list[str]:
    """The accounts the payments of ``requests`` may land in: the pool shard of each round, and
    the subsidy account (late sales)."""
    return sorted({ledger.pool_shard_name(r.round_id, shard) for r in requests} | {ledger.SUBSIDY})


def destination_names(buys: Sequence[_Buy], view: BatchView, shard: int) -> list[str]:
    """The accounts the accepted ``buys`` pay into (pool shards; the subsidy for late sales)."""
    return sorted(
        {
            ledger.SUBSIDY
            if is_late(view, r.round_id)
            else ledger.pool_shard_name(r.round_id, shard)
            for r in buys
        }
    )


def _payments(
    paid: Sequence[_Buy], view: BatchView, account_ids: dict[str, int], shard: int
) -> list[ledger.Transfer]:
    """The paid purchases' transfers: wallet → pool shard ``shard`` (a purchase in the round),
    or wallet → the subsidy account (a late sale, :data:`LATE_KIND`)."""
    out: list[ledger.Transfer] = []
    for r in paid:
        late = is_late(view, r.round_id)
        to = ledger.SUBSIDY if late else ledger.pool_shard_name(r.round_id, shard)
        out.append(
            (
                LATE_KIND if late else "purchase",
                view.wallets[r.client_id][0],
                account_ids[to],
                view.rounds[r.round_id][1],
                r.round_id,
                r.client_id,
            )
        )
    return out


def queue_bookings(
    verdict: Verdict,
    view: BatchView,
    writes: BatchWrite,
    shard: int,
    shard_ids: dict[str, int],
    txn_ids: Sequence[int],
    purchase_ids: Sequence[int],
    now: datetime,
) -> None:
    """Queue the accepted purchases' rows in ``writes`` and fill their outcomes (no I/O).

    Money (wallet −p, pool shard ``shard`` +p) for every paid purchase, under the reserved
    ``txn_ids`` in order; a ``purchases`` row under each of ``purchase_ids``; a buy decision;
    the key's stored result, which is also the request's answer.
    """
    buys = verdict.buys()
    price = {r.round_id: view.rounds[r.round_id][1] for r in buys}
    paid = [r for r in buys if price[r.round_id] > 0]  # a free model moves no money
    ledger.queue_moves(writes, _payments(paid, view, shard_ids, shard), txn_ids, now)
    txn_of = {(r.round_id, r.client_id): t for r, t in zip(paid, txn_ids, strict=False)}
    if len(purchase_ids) < len(buys):
        raise ValueError("purchase_ids: one reserved id per accepted purchase is needed")
    writes.insert(
        _PURCHASES,
        [
            {
                "id": pid,
                "round_id": r.round_id,
                "client_id": r.client_id,
                "price_micros": price[r.round_id],
                "transaction_id": txn_of.get((r.round_id, r.client_id)),
                "refunded": False,
                "task": view.tasks.get(r.round_id, DEFAULT_TASK),
            }
            for pid, r in zip(purchase_ids, buys, strict=False)
        ],
    )
    # A buyer who had not declared has declared now (a late buyer declares nothing: the round's
    # decisions are closed and settled).
    queue_decisions(
        writes,
        [(r.round_id, r.client_id, Strategy.BUY) for r in buys if not is_late(view, r.round_id)],
        shard,
        now,
        view.tasks,
    )
    results = [
        purchase_body(
            purchase_id,
            r.round_id,
            r.client_id,
            price[r.round_id],
            txn_of.get((r.round_id, r.client_id)),
            balance,
            late=is_late(view, r.round_id),
        )
        for r, purchase_id, balance in zip(buys, purchase_ids, verdict.left, strict=False)
    ]
    writes.insert(
        idempotency.KEYS,
        [
            idempotency.key_row(r.principal, r.key, r.fingerprint, CREATED, body, now)
            for r, body in zip(buys, results, strict=True)
        ],
    )
    for i, body in zip(verdict.accepted, results, strict=True):
        verdict.outcomes[i] = (CREATED, body)


def purchase_body(
    purchase_id: int,
    round_id: int,
    client_id: int,
    price_micros: int,
    transaction_id: int | None,
    balance_micros: int,
    late: bool = False,
) -> dict[str, Any]:
    """:class:`PurchaseOut`'s JSON, built by the model (``model_construct``: every value comes
    from the ledger, so the hot path skips validating them again)."""
    return PurchaseOut.model_construct(
        purchase_id=purchase_id,
        round_id=round_id,
        client_id=client_id,
        price=from_micros(price_micros),
        transaction_id=transaction_id,
        balance=from_micros(balance_micros),
        late=late,
    ).model_dump(mode="json")


def finish(verdict: Verdict, tasks: Mapping[int, str] | None = None) -> BookedBatch:
    """The batch's answers once written (aliases repeat their first); ``tasks``: rounds' tasks."""
    for i, first in verdict.aliases.items():
        verdict.outcomes[i] = verdict.outcomes[first]
    rounds = [verdict.todo[i].round_id for i in verdict.accepted]
    booked_tasks = [(tasks or {}).get(r, DEFAULT_TASK) for r in rounds]
    outcomes = [o for o in verdict.outcomes if o is not None]
    return BookedBatch(outcomes, len(rounds), sorted(set(rounds)), booked_tasks)


# --- the batch on a SQLAlchemy session (SQLite, and PostgreSQL's general path) -------------


def _lock_wallets(
    session: Session, reads: BatchReads, client_ids: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """client id → (wallet account id, balance) with the wallets locked; made when missing."""
    conn = session.connection()
    params: dict[str, Any] = {"verifiers": [], "client_ids": client_ids}
    wallets = {r[0]: (r[1], r[2]) for r in conn.execute(reads.wallets, params)}
    missing = [c for c in client_ids if c not in wallets]
    if missing:  # wallets are made at registration; a client made another way gets one now
        for c in missing:
            ledger.ensure_account(session, ledger.wallet_name(c), c)
        params["client_ids"] = missing
        wallets.update({r[0]: (r[1], r[2]) for r in conn.execute(reads.wallets, params)})
    return wallets


def book_purchases(
    session: Session,
    requests: Sequence[PurchaseRequest],
    shard: int = 0,
    account_ids: dict[str, int] | None = None,
) -> BookedBatch:
    """Decide and book ``requests`` in the caller's transaction, as if one after another.

    The batch's payments land in pool shard ``shard`` (batches in flight together pass different
    shards, so they do not wait on one another's pool row). ``account_ids`` remembers the pool
    shards' account ids between batches on one database (accounts are never renamed or deleted).

    Statements per batch: callers' ids (for tokens not yet known), rounds, wallet locks, stored
    keys, past purchases, then (if anything is bought) ids for the new rows and one write of
    every row (:class:`~mots.platform.db.BatchWrite`). Makes a missing wallet or pool shard
    account (:mod:`services.market.purchases_pg` leaves those batches to this path). The
    caller commits.
    """
    conn = session.connection()
    q = batch_reads(conn.dialect.name)
    unknown = sorted({r.verifier for r in requests if r.client_id is None})
    client_of: dict[str, int] = {}
    if unknown:
        rows = conn.execute(q.callers, {"verifiers": unknown, "client_ids": []})
        client_of = {v: c for v, c in rows}
    callers = {
        r.client_id if r.client_id is not None else client_of.get(r.verifier) for r in requests
    }
    client_ids = sorted(c for c in callers if c is not None)
    if not client_ids:
        return finish(decide(requests, BatchView(client_of, {}, {}, {}, set())))
    params = {
        "verifiers": [],
        "client_ids": client_ids,
        "round_ids": sorted({r.round_id for r in requests}),
        "keys": sorted({r.key for r in requests}),
    }
    round_rows = conn.execute(q.rounds, params).all()
    rounds = {r[0]: (r[1], r[2]) for r in round_rows}
    wallets = _lock_wallets(session, q, client_ids)
    stored = {(r[0], r[1]): (r[2], r[3], r[4]) for r in conn.execute(q.stored_keys, params)}
    bought, trained = split_bought(conn.execute(q.bought, params))
    members = {(r[0], r[1]) for r in conn.execute(q.members, params)}
    view = BatchView(
        client_of, rounds, wallets, stored, bought, members, trained, gone_models(round_rows)
    )
    view.tasks = {r[0]: r[4] for r in round_rows}
    verdict = decide(requests, view)
    buys = verdict.buys()
    if buys:
        known = account_ids if account_ids is not None else {}
        missing = [n for n in destination_names(buys, view, shard) if n not in known]
        if missing:
            names = conn.execute(q.accounts, {"names": missing})
            found: dict[str, int] = {n: i for n, i in names}
            for name in missing:  # made when the round opened; made here if it was not
                found[name] = found.get(name) or ledger.ensure_account(session, name)
            known.update(found)  # the caller keeps these only once the transaction commits
        writes = BatchWrite()
        queue_bookings(
            verdict,
            view,
            writes,
            shard,
            known,
            reserve_ids(conn, _TRANSACTIONS, sum(1 for r in buys if rounds[r.round_id][1] > 0)),
            reserve_ids(conn, _PURCHASES, len(buys)),
            datetime.now(UTC),
        )
        writes.flush(conn)
    return finish(verdict, view.tasks)
