"""Strategy declarations (join, buy, abstain) for a round that is collecting decisions.

Declarations are booked in batches (:mod:`services.market.booking` collects the ones in
flight): :func:`book_declarations` decides and writes a whole batch in one transaction with a
fixed number of statements. Each declaration that adds a client's first decision in a round adds
one to the round's tally (:class:`~services.market.models.RoundTally`, in the same statement),
so "everyone declared" (:func:`all_declared`) reads a handful of counter rows, never the
population.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import Session

from mots.platform.api.base import RoundState, Strategy
from mots.platform.api.market import DecisionIn, DecisionOut
from mots.platform.db import BatchWrite, Tally, one_of
from services.market.auth import refusal_reason
from services.market.errors import Conflict, Forbidden, NotFound, Refusal, Unauthorized
from services.market.join_fees import hold_join_fees
from services.market.models import (
    DEFAULT_TASK,
    Base,
    Client,
    Decision,
    MarketRound,
    Purchase,
    RoundMember,
    RoundTally,
)

_ROUNDS = Base.metadata.tables[MarketRound.__tablename__]
_DECISIONS = Base.metadata.tables[Decision.__tablename__]
_PURCHASES = Base.metadata.tables[Purchase.__tablename__]
_TALLIES = Base.metadata.tables[RoundTally.__tablename__]
_MEMBERS = Base.metadata.tables[RoundMember.__tablename__]
_CLIENTS = Base.metadata.tables[Client.__tablename__]


def declared_tally(shard: int) -> Tally:
    """Count a write's new decision rows into the rounds' tally shard ``shard``."""
    return Tally(_TALLIES, "declared", "round_id", (("shard", shard),))


@dataclass(frozen=True, slots=True)
class Declaration:
    """One ``PUT /v1/rounds/{round_id}/decision``: a client's strategy in a round. A caller the
    API process does not know yet comes as its token's ``verifier`` (client id 0), resolved in
    the batch's own transaction (one query for the batch, as purchases do)."""

    client_id: int
    round_id: int
    strategy: Strategy
    verifier: str | None = None


def _unknown_token() -> Unauthorized:
    return Unauthorized("Authorization", "the token is not a registered client's")


def inactive(client_id: int, status: str) -> Forbidden:
    """The refusal of a pending or departed client (only active clients declare or buy)."""
    return Forbidden("Authorization", refusal_reason(client_id, status))


def resolve_declarers(
    conn: Connection, requests: Sequence[Declaration]
) -> list[Declaration | Refusal]:
    """Each request with its caller's client id, or the refusal of its token: 401 for no client
    (or a revoked one), 403 for a pending or departed one. One query for the unknown tokens."""
    unknown = sorted({r.verifier for r in requests if not r.client_id and r.verifier})
    found: dict[str, tuple[int, str]] = {}
    if unknown:
        q = select(_CLIENTS.c.token_hash, _CLIENTS.c.id, _CLIENTS.c.status).where(
            one_of(_CLIENTS.c.token_hash, "verifiers", conn.dialect.name)
        )
        found = {v: (i, st) for v, i, st in conn.execute(q, {"verifiers": unknown})}
    out: list[Declaration | Refusal] = []
    for r in requests:
        if r.client_id:
            out.append(r)
            continue
        client = found.get(r.verifier or "")
        if client is None or client[1] == "revoked":
            out.append(_unknown_token())
        elif client[1] != "active":
            out.append(inactive(client[0], client[1]))
        else:
            out.append(Declaration(client[0], r.round_id, r.strategy))
    return out


def not_a_member(client_id: int, round_id: int) -> Forbidden:
    """The refusal of a client outside the round's population (registered or approved after the
    market snapshotted it for pricing: it was not priced in it; or a client of another task,
    issue 36)."""
    return Forbidden(
        "client_id",
        f"client {client_id} is not in round {round_id}'s population (it was registered or "
        "approved after the round was priced, so it was not priced for it, and takes part "
        "from the next round; or it takes part in another task than the round trains)",
    )


@lru_cache(maxsize=4)
def _queries(dialect: str) -> tuple[Any, Any, Any]:
    """The batch's reads: the rounds (shared locks), the paid purchases of its clients and which
    of them are in the rounds' populations."""
    rounds = (
        select(_ROUNDS.c.id, _ROUNDS.c.state, _ROUNDS.c.task)
        .where(one_of(_ROUNDS.c.id, "round_ids", dialect))
        .with_for_update(read=True)  # close_round's FOR UPDATE waits for the batch, and it for it
    )
    paid = select(_PURCHASES.c.round_id, _PURCHASES.c.client_id).where(
        one_of(_PURCHASES.c.round_id, "round_ids", dialect),
        one_of(_PURCHASES.c.client_id, "client_ids", dialect),
        _PURCHASES.c.refunded.is_(False),
    )
    members = select(_MEMBERS.c.round_id, _MEMBERS.c.client_id).where(
        one_of(_MEMBERS.c.round_id, "round_ids", dialect),
        one_of(_MEMBERS.c.client_id, "client_ids", dialect),
    )
    return rounds, paid, members


def decide_declaration(
    d: Declaration, state: str | None, paid: bool, member: bool = True
) -> DecisionOut | Refusal:
    """One declaration's answer given its round's state (None: no such round), whether its
    client paid for the round's model and whether it is in the round's population (pure)."""
    if state is None:
        return NotFound("round_id", f"round {d.round_id} does not exist")
    if state != RoundState.COLLECTING:
        return Conflict(
            "round_id", f"round {d.round_id} is {state}; decisions are taken while it is collecting"
        )
    if not member:
        return not_a_member(d.client_id, d.round_id)
    if d.strategy != Strategy.BUY and paid:
        return Conflict("strategy", "this client paid for the round's model; a purchase is final")
    return DecisionOut(round_id=d.round_id, client_id=d.client_id, strategy=d.strategy, paid=paid)


def book_declarations(
    session: Session, requests: Sequence[Declaration], shard: int = 0
) -> list[DecisionOut | Refusal]:
    """Decide and write ``requests`` in the caller's transaction, as if one after another.

    At most five statements whatever the batch's size: the callers not known yet (by token),
    the rounds, the paid purchases, the callers' memberships of the rounds' populations, and one
    write of the accepted decisions (the last of a client's in a round wins) with the count of
    new ones added to tally shard ``shard``; plus, where a joiner's type is quoted a fee, the
    holds' reads and one booking per fee held (:mod:`services.market.join_fees`). The caller
    commits.
    """
    if not requests:
        return []
    conn = session.connection()
    resolved = resolve_declarers(conn, requests)
    valid = [r for r in resolved if isinstance(r, Declaration)]
    decided = iter(_book_resolved(session, valid, shard))
    return [next(decided) if isinstance(r, Declaration) else r for r in resolved]


def _book_resolved(
    session: Session, requests: Sequence[Declaration], shard: int
) -> list[DecisionOut | Refusal]:
    """:func:`book_declarations` of requests whose callers are known; a join where the type pays a
    fee holds it first (:mod:`services.market.join_fees`: 402 on a short wallet)."""
    if not requests:
        return []
    conn = session.connection()
    rounds_q, paid_q, members_q = _queries(conn.dialect.name)
    round_ids = sorted({r.round_id for r in requests})
    client_ids = sorted({r.client_id for r in requests})
    found = conn.execute(rounds_q, {"round_ids": round_ids}).all()
    states = {r[0]: r[1] for r in found}
    task_of = {r[0]: r[2] for r in found}
    ids = {"round_ids": round_ids, "client_ids": client_ids}
    paid = {(r[0], r[1]) for r in conn.execute(paid_q, ids)}
    members = {(r[0], r[1]) for r in conn.execute(members_q, ids)}
    outcomes = [
        decide_declaration(
            r,
            states.get(r.round_id),
            (r.round_id, r.client_id) in paid,
            (r.round_id, r.client_id) in members,
        )
        for r in requests
    ]
    accepted = [i for i, out in enumerate(outcomes) if isinstance(out, DecisionOut)]
    wanted = [(r.round_id, r.client_id, r.strategy == Strategy.JOIN) for r in requests]
    fees = hold_join_fees(session, [wanted[i] for i in accepted])
    for i, refusal in zip(accepted, fees, strict=True):
        outcomes[i] = refusal or outcomes[i]
    last: dict[tuple[int, int], Strategy] = {}  # the last of a client's in a round wins
    for r, out in zip(requests, outcomes, strict=True):
        if isinstance(out, DecisionOut):
            last[(r.round_id, r.client_id)] = r.strategy
    if last:
        writes = BatchWrite()
        decided = [(*k, last[k]) for k in sorted(last)]
        queue_decisions(writes, decided, shard, datetime.now(UTC), task_of)
        writes.flush(conn)
    return outcomes


def queue_decisions(
    writes: BatchWrite,
    decisions: Sequence[tuple[int, int, Strategy]],
    shard: int,
    now: datetime,
    task_of: Mapping[int, str] | None = None,
) -> None:
    """Queue (round id, client id, strategy) decisions in ``writes``: each replaces the client's
    decision in the round, and a client's first decision in a round adds one to tally shard
    ``shard``. Declarations and purchases (a buy decision) both write them so; each row names its
    round's task (``task_of``, round id → task; ``fashion-mnist`` where not given)."""
    tasks = task_of or {}
    writes.insert(
        _DECISIONS,
        [
            {
                "round_id": round_id,
                "client_id": client_id,
                "strategy": strategy.value,
                "dropped": False,
                "updated_at": now,
                "task": tasks.get(round_id, DEFAULT_TASK),
            }
            for round_id, client_id, strategy in decisions
        ],
        conflict=("round_id", "client_id"),
        conflict_update=("strategy", "updated_at"),
        tally=declared_tally(shard),
    )


def record_decision(
    session: Session, round_id: int, client_id: int, body: DecisionIn
) -> DecisionOut:
    """Book one declaration (:func:`book_declarations` of one); raises its refusal."""
    (out,) = book_declarations(session, [Declaration(client_id, round_id, body.strategy)])
    if isinstance(out, Refusal):
        raise out
    return out


def declared(session: Session, round_id: int) -> int:
    """How many clients have declared in the round: the sum of its tally shards."""
    total = session.scalar(
        select(func.coalesce(func.sum(RoundTally.declared), 0)).where(
            RoundTally.round_id == round_id
        )
    )
    return int(total or 0)


def all_declared(session: Session, round_id: int) -> bool:
    """Whether every client registered when the round opened has declared (O(1): the round's
    population and its tally shards, not a count of clients or decisions)."""
    population = session.scalar(select(MarketRound.population).where(MarketRound.id == round_id))
    return bool(population) and declared(session, round_id) >= int(population or 0)
