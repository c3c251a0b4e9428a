"""The market's side of a round, called by the orchestration service through the market queue.

open → collecting (decisions and purchases taken) → closed (declared buyers who did not pay
count as abstaining) → settled (rewards booked, pool emptied) → published (model downloadable).

Settlement rule (also the drop-out rule): each participant that completed training receives
r_i of its type (a negative r_i, a fee, was held from its wallet when it joined,
:mod:`services.market.join_fees`: the captured fee is kept and the rest of the hold refunded, so
no wallet goes into debt); a participant that dropped out mid-round forfeits its reward and is not
charged, and gets no model. A participant revoked by the operator or departed (``DELETE /v1/me``)
while its round collects or trains is removed by the same rule: left out of K at the close (and
its SuperNode key out of the keys handed to the SuperLink, :func:`node_keys.keys_of`), and at
settlement treated as a drop-out whatever the trainer reported. A failed round refunds every buyer and every held join fee; a buyer the operator revoked
before the round settled is refunded what it paid (it can no longer download). Whatever remains in the round's
pool afterwards goes to ``platform:surplus``; a participation bond held at join
(:mod:`services.market.bonds`) is slashed to ``platform:surplus`` when the participant failed
verification, else returned whole; a shortfall is drawn from ``platform:subsidy``
(the platform's incentive cost, Problem 1's [Σ K_i r_i − Σ B_i p]⁺).

Authorise-then-capture: the quote the round opened with is the authorisation. The realised terms
the orchestration service sends are captured within it (:func:`captured_terms`, the rule of
:mod:`mots.economics.capture`): no participant is paid or charged more than its type's quoted
reward or charge, no buyer pays more than the quoted price (the difference to a lower realised
price is refunded), and the subsidy never exceeds the round's budget (payouts are scaled pro rata
down to it). The quote binds the platform too: the participants of a type that did not over-join
its quoted K*_i are paid their quoted reward as far as the round's surplus, the buyers' payments up
to the quoted price and the budget fund it, before any surplus goes to the platform.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import delete, func, insert, literal, or_, select, update
from sqlalchemy.orm import Session

from mots.economics.scenario import ClientType
from mots.platform.api.base import RoundState, Strategy
from mots.platform.api.rounds import SettleResult
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import (
    DeclarationProgress,
    OpenRoundPayload,
    Population,
    RoundDecisions,
    SettlePayload,
)
from mots.platform.db import one_of
from mots.platform.money import MAX_BALANCE_MICROS, from_micros, to_micros
from mots.platform.settings.market import SubsidyBudget
from services.market import bonds, join_fees, ledger, tasks
from services.market.captured_terms import CapturedTerms, captured_terms
from services.market.decisions import declared
from services.market.errors import OutOfRange
from services.market.models import Client, Decision, MarketRound, Purchase, RoundMember

_CLIENT_ID = Client.metadata.tables[Client.__tablename__].c.id
_DECISION_CLIENT = Decision.metadata.tables[Decision.__tablename__].c.client_id
log = logging.getLogger(__name__)


_DEFAULT_BUDGET: Decimal = SubsidyBudget.model_fields["round_subsidy_budget"].default
"""MOTS_ROUND_SUBSIDY_BUDGET's default, as the registry declares it (the worker passes the
setting; callers that pass none, tests, get the same value)."""


class RoundError(ValueError):
    """A round operation that the round's state does not allow."""


def population(session: Session, round_id: int, task: str = DEFAULT_TASK) -> Population:
    """The round's population for pricing, grouped by type in non-decreasing data size: its
    snapshot as the round's members (:class:`RoundMember`), written here on the first call from
    the active (attested or approved) clients (pending and revoked ones are never priced) and
    read back on any later call, so the counts priced and the clients admitted at the open are
    one set (issue 25: the market owns membership). Only clients of the round's ``task`` are
    members (issue 36), and a task that is not stored (or is retired) is refused here, naming
    ``task``, before anything is written. Set-based: one insert from a select."""
    tasks.check_open(session, task)
    _drop_stale_snapshots(session, round_id, task)
    snapped = select(RoundMember.client_id).where(RoundMember.round_id == round_id).limit(1)
    if session.scalar(snapped) is None and session.get(MarketRound, round_id) is None:
        active = select(literal(round_id), Client.id).where(
            Client.status == "active", Client.task == task
        )
        session.execute(insert(RoundMember).from_select(["round_id", "client_id"], active))
    rows = session.execute(  # plain rows: 100,000 clients in a fraction of a second
        select(Client.type_name, Client.data_size, Client.cost_micros, func.count())
        .join(RoundMember, RoundMember.client_id == Client.id)
        .where(RoundMember.round_id == round_id)
        .group_by(Client.type_name, Client.data_size, Client.cost_micros)
    )
    groups: dict[str, ClientType] = {}
    for type_name, data_size, cost_micros, count in rows:
        found = groups.get(type_name)  # an attested type has one (D_i, C_i); else the first
        groups[type_name] = (
            ClientType(
                name=type_name,
                data_size=data_size,
                cost=float(from_micros(cost_micros)),
                count=count,
            )
            if found is None
            else found.model_copy(update={"count": found.count + count})
        )
    return Population(types=sorted(groups.values(), key=lambda t: (t.data_size, t.name)))


def _drop_stale_snapshots(session: Session, round_id: int, task: str = DEFAULT_TASK) -> None:
    """Members of ``task``'s rounds that never opened here (priced, then failed before the open)
    other than ``round_id``: at most one such snapshot per task lingers until that task's next
    round is priced (another task's round priced meanwhile keeps its snapshot: issue 36)."""
    opened = select(MarketRound.id)
    of_task = select(Client.id).where(Client.task == task)
    session.execute(
        delete(RoundMember).where(
            RoundMember.round_id != round_id,
            RoundMember.round_id.not_in(opened),
            RoundMember.client_id.in_(of_task),
        )
    )


def members_of(session: Session, round_id: int) -> dict[str, list[int]]:
    """A round's members (client ids, ascending) per type; empty once it is settled."""
    out: dict[str, list[int]] = {}
    for cid, type_name in session.execute(
        select(Client.id, Client.type_name)
        .join(RoundMember, RoundMember.client_id == Client.id)
        .where(RoundMember.round_id == round_id)
        .order_by(Client.id)
    ):
        out.setdefault(type_name, []).append(cid)
    return out


def open_round(session: Session, quote: OpenRoundPayload) -> MarketRound:
    """Publish a round's quote and start collecting decisions (idempotent per round id)."""
    rnd = session.get(MarketRound, quote.round_id)
    if rnd is not None:
        return rnd
    if why := tasks.refusal(session, quote.task):
        raise RoundError(why)
    still_open = session.scalar(
        select(func.count())
        .select_from(MarketRound)
        .where(MarketRound.state == RoundState.COLLECTING, MarketRound.task == quote.task)
    )
    if still_open:
        raise RoundError(f"round_id: another round of task {quote.task!r} is still collecting")
    rnd = MarketRound(
        task=quote.task,
        id=quote.round_id,
        state=RoundState.COLLECTING,
        population=0,
        mechanism=quote.mechanism,
        price_micros=to_micros(quote.price),
        quote_json=quote.model_dump_json(),
    )
    session.add(rnd)
    session.flush()
    rnd.population = _enrol_members(session, quote.round_id, quote.task)  # whom it waits for
    guard_pool(rnd.price_micros, rnd.population)
    session.flush()
    for name in (ledger.pool_name(quote.round_id), *ledger.pool_shard_names(quote.round_id)):
        ledger.ensure_account(session, name)
    return rnd


def guard_pool(price_micros: int, population: int) -> None:
    """Refuse (:class:`OutOfRange`, nothing written) a round whose purchases could take its pool
    past :data:`~mots.platform.money.MAX_BALANCE_MICROS`: the purchase batcher credits the pool
    shards without reading them (its hot path), and that is sound because only the round's
    members buy, each once, at the round's price, so the shards together never hold more than
    price × population (issue 37: the batcher's credit side)."""
    if price_micros * population > MAX_BALANCE_MICROS:
        raise OutOfRange(
            "price",
            f"{from_micros(price_micros):f} × {population} members could take the round's pool "
            f"past the limit of {from_micros(MAX_BALANCE_MICROS):f} an account may hold "
            "(MAX_BALANCE_MICROS); the round was not opened",
        )


def _enrol_members(session: Session, rid: int, task: str = DEFAULT_TASK) -> int:
    """The round's members (:class:`RoundMember`): its population as :func:`population`
    snapshotted it for pricing, less the clients no longer active (revoked or left in between);
    without a snapshot (a round opened unpriced: tests, tools) every active client; only the
    clients of the round's ``task`` in either case (issue 36: a participant of another task
    cannot declare, buy, join or download here). Set-based; returns how many."""
    snapped = select(RoundMember.client_id).where(RoundMember.round_id == rid).limit(1)
    if session.scalar(snapped) is None:
        active = select(literal(rid), Client.id).where(
            Client.status == "active", Client.task == task
        )
        session.execute(insert(RoundMember).from_select(["round_id", "client_id"], active))
    else:
        inactive = select(Client.id).where(or_(Client.status != "active", Client.task != task))
        session.execute(
            delete(RoundMember).where(
                RoundMember.round_id == rid, RoundMember.client_id.in_(inactive)
            )
        )
    return int(
        session.scalar(
            select(func.count()).select_from(RoundMember).where(RoundMember.round_id == rid)
        )
        or 0
    )


def decisions(session: Session, round_id: int) -> RoundDecisions:
    """Who declared what, by type, and which buyers have paid: of the round's members only (the
    market owns them; admission refuses anyone else, and a row past it is not counted)."""
    rnd = session.get(MarketRound, round_id)
    if rnd is None:
        raise RoundError(f"round_id: round {round_id} is not open at the market")
    type_of: dict[int, str] = {}
    removed: set[int] = set()  # revoked or departed: out of K (issue 24)
    for cid, type_name, state in session.execute(
        select(Client.id, Client.type_name, Client.status)
    ):
        type_of[cid] = type_name
        if state != "active":
            removed.add(cid)
    paid = set(
        session.scalars(
            select(Purchase.client_id).where(
                Purchase.round_id == round_id, Purchase.refunded.is_(False)
            )
        )
    )
    out: dict[str, dict[str, list[int]]] = {"join": {}, "buy": {}, "paid": {}}
    declared = 0
    held = select(RoundMember.client_id).where(RoundMember.round_id == round_id)
    taken = select(Decision).where(Decision.round_id == round_id)
    if session.scalar(held.limit(1)) is not None:  # the members, kept until settlement
        taken = taken.where(Decision.client_id.in_(held))  # a non-member's row is not counted
    for d in session.scalars(taken.order_by(Decision.client_id)):
        declared += 1
        t = type_of[d.client_id]
        if d.strategy == Strategy.JOIN and d.client_id not in removed:
            out["join"].setdefault(t, []).append(d.client_id)
        elif d.strategy == Strategy.BUY:
            out["buy"].setdefault(t, []).append(d.client_id)
            if d.client_id in paid:
                out["paid"].setdefault(t, []).append(d.client_id)
    return RoundDecisions(
        round_id=round_id,
        registered=len(type_of),
        declared=declared,
        participants=out["join"],
        buyers=out["buy"],
        paid_buyers=out["paid"],
    )


def progress(session: Session, round_id: int) -> DeclarationProgress:
    """The round's state, its population at opening and its declarations so far (counters)."""
    rnd = session.get(MarketRound, round_id)
    if rnd is None:
        raise RoundError(f"round_id: round {round_id} is not open at the market")
    return DeclarationProgress(
        round_id=round_id,
        state=rnd.state,
        registered=rnd.population,
        declared=declared(session, round_id),
    )


def close_round(session: Session, round_id: int) -> RoundDecisions:
    """Stop taking decisions and purchases; unpaid buyers are recorded as abstaining."""
    rnd = session.get(MarketRound, round_id, with_for_update=True)
    if rnd is None:
        raise RoundError(f"round_id: round {round_id} is not open at the market")
    if rnd.state == RoundState.COLLECTING:
        rnd.state = RoundState.TRAINING
        paid = set(session.scalars(select(Purchase.client_id).where(Purchase.round_id == round_id)))
        for d in session.scalars(
            select(Decision).where(Decision.round_id == round_id, Decision.strategy == "buy")
        ):
            if d.client_id not in paid:
                d.strategy = Strategy.ABSTAIN.value
        gone = select(Client.id).where(Client.status != "active")
        session.execute(  # removed participants: no reward, no charge, no model
            update(Decision)
            .where(
                Decision.round_id == round_id,
                Decision.strategy == Strategy.JOIN.value,
                Decision.client_id.in_(gone),
            )
            .values(dropped=True)
        )
        session.flush()
    return decisions(session, round_id)


@dataclass
class SettlementPlan:
    """A settlement's transfers, in booking order, and their totals (micro-units)."""

    moves: list[ledger.Transfer]
    paid: int
    charged: int
    refunds: int
    top_up: int
    left: int


def _plan_transfers(
    rid: int,
    held: dict[int, int],
    accounts: tuple[int, int, int, list[int]],
    booked: list[int],
    type_of: dict[int, str],
    wallets: dict[int, int],
    purchases: Sequence[Any],
    terms: CapturedTerms,
    *,
    refund_buyers: bool,
    fees: dict[int, int] | None = None,
    revoked: frozenset[int] = frozenset(),
) -> SettlementPlan:
    """The round's transfers: the buyers' payments consolidated into the pool, each booked
    participant's reward (or charge, a negative reward: out of its held join fee ``fees``, the
    rest of the hold refunded; never charged without a hold), each hold of a joiner not booked refunded whole, each buyer's
    refund (all of it for a failed round or a buyer the operator ``revoked``, else what it paid
    above the realised price), then the subsidy that covers a deficit or the surplus that takes
    what is left, so the pool ends at zero."""
    pool, subsidy, surplus, shards = accounts
    fees = fees or {}
    moves: list[ledger.Transfer] = [("consolidate", s, pool, held[s], rid, None) for s in shards]
    balance = held[pool] + sum(held[s] for s in shards)
    paid = charged = refunds = 0
    for cid in booked:
        reward = terms.rewards[type_of[cid]]
        if reward < 0 and cid not in fees:
            continue  # a fee is only ever taken out of its hold: no wallet goes into debt
        hold = fees[cid] if reward < 0 else 0
        kind = "fee_refund" if hold else "reward"
        moves.append((kind, pool, wallets[cid], reward + hold, rid, cid))
        paid += max(0, reward)
        charged += max(0, -reward)
        balance -= reward + hold
    for cid in sorted(set(fees) - {c for c in booked if terms.rewards[type_of[c]] < 0}):
        moves.append(("fee_refund", pool, wallets[cid], fees[cid], rid, cid))
        balance -= fees[cid]
    for cid, price in purchases:
        back = price if refund_buyers or cid in revoked else max(0, price - terms.price)
        moves.append(("refund", pool, wallets[cid], back, rid, cid))
        refunds += back
        balance -= back
    top_up, left = max(0, -balance), max(0, balance)
    moves += [
        ("subsidy", subsidy, pool, top_up, rid, None),
        ("surplus", pool, surplus, left, rid, None),
    ]
    return SettlementPlan(moves, paid, charged, refunds, top_up, left)


def settle_round(
    session: Session,
    payload: SettlePayload,
    default_budget: Decimal = _DEFAULT_BUDGET,
    bulk: bool = True,
) -> SettleResult:
    """Book the round's rewards, charges, refunds, subsidy and surplus (once per round), with the
    realised terms captured within the quote and the subsidy budget (:func:`captured_terms`).

    ``bulk``: every transfer in one set-based write (:func:`ledger.book_transfers`), a fixed
    number of statements whatever the population; else one posting per transfer (the reference
    the bulk path is tested against).
    """
    rnd = session.get(MarketRound, payload.round_id, with_for_update=True)
    if rnd is None:
        raise RoundError(f"round_id: round {payload.round_id} is not open at the market")
    if rnd.settlement_json is not None:
        return SettleResult.model_validate_json(rnd.settlement_json)
    if rnd.state == RoundState.COLLECTING:
        close_round(session, payload.round_id)
    rid = payload.round_id
    pool = ledger.ensure_account(session, ledger.pool_name(rid))
    subsidy = ledger.ensure_account(session, ledger.SUBSIDY)
    surplus = ledger.ensure_account(session, ledger.SURPLUS)
    shards = [ledger.ensure_account(session, n) for n in ledger.pool_shard_names(rid)]
    held = ledger.lock_accounts(session, [pool, subsidy, surplus, *shards])
    joined = _joined(session, rid) if payload.participants is None else payload.participants
    joined = [] if payload.refund_buyers and payload.participants is None else joined
    type_of, removed = _types_of(session, joined)
    dropped = set(payload.dropped) | removed
    purchases = _purchases(session, rid)
    booked = [cid for cid in sorted(joined) if cid not in dropped and cid in type_of]
    fees, revoked = _holds(session, payload, booked, purchases)
    held_bonds = join_fees.held_in_round(session, rid, bonds.BOND)
    wallets = ledger.ensure_wallets(
        session, sorted({*booked, *fees, *held_bonds, *(p[0] for p in purchases)})
    )
    terms = captured_terms(
        stored_quote(rnd),
        payload,
        _count_types(booked, type_of),
        0 if payload.refund_buyers else len(purchases),
        default_budget,
        joined=_count_types([c for c in joined if c in type_of], type_of),
    )
    plan = _plan_transfers(
        rid, held, (pool, subsidy, surplus, shards), booked, type_of, wallets, purchases, terms,
        refund_buyers=payload.refund_buyers, fees=fees, revoked=revoked,
    )  # fmt: skip
    slashed = set() if payload.refund_buyers else set(payload.failed_verification)
    bond_moves, returned, forfeited = bonds.settlement_moves(
        session, rid, held_bonds, wallets, surplus, slashed
    )
    moves = [*plan.moves, *bond_moves]
    if bulk:
        ledger.book_transfers(session, moves)
    else:
        for move in moves:
            ledger.transfer(session, *move)
    _mark(session, payload.round_id, sorted(dropped), payload.refund_buyers, revoked)
    session.execute(delete(RoundMember).where(RoundMember.round_id == rid))  # trained: done
    if removed:
        log.warning("round %s: removed participants %s are not paid", rid, sorted(removed))
    result = _settle_result(payload, purchases, plan, terms, removed, (returned, forfeited))
    rnd.state = RoundState.SETTLED_BY_RULE if payload.refund_buyers else RoundState.SETTLING
    rnd.settlement_json = result.model_dump_json()
    if payload.artifact_path and not payload.refund_buyers:
        rnd.artifact_path = payload.artifact_path
        rnd.artifact_sha256 = payload.artifact_sha256
    session.flush()
    return result


def _settle_result(
    payload: SettlePayload,
    purchases: Sequence[Any],
    plan: SettlementPlan,
    terms: CapturedTerms,
    removed: set[int],
    bonds_moved: tuple[int, int],
) -> SettleResult:
    """What :func:`settle_round` booked, in currency units (bonds: returned, slashed)."""
    returned, forfeited = bonds_moved
    return SettleResult(
        round_id=payload.round_id,
        payments=from_micros(sum(p[1] for p in purchases)),
        rewards_paid=from_micros(plan.paid),
        charges=from_micros(plan.charged),
        subsidy=from_micros(plan.top_up),
        surplus=from_micros(plan.left),
        refunds=from_micros(plan.refunds),
        subsidy_budget=from_micros(terms.budget),
        captured_price=None if payload.refund_buyers else from_micros(terms.price),
        captured_rewards={n: from_micros(r) for n, r in terms.rewards.items()},
        capture_rule=terms.rule,
        removed=sorted(removed),
        bonds_returned=from_micros(returned),
        bonds_slashed=from_micros(forfeited),
    )


def _joined(session: Session, round_id: int) -> list[int]:
    """The client ids that declared join in the round, as the market recorded them (its members
    only, as :func:`decisions` counts them; revoked ones are found removed by the caller)."""
    joined = select(Decision.client_id).where(
        Decision.round_id == round_id, Decision.strategy == Strategy.JOIN.value
    )
    held = select(RoundMember.client_id).where(RoundMember.round_id == round_id)
    if session.scalar(held.limit(1)) is not None:
        joined = joined.where(Decision.client_id.in_(held))
    return sorted(session.scalars(joined))


def _count_types(client_ids: Sequence[int], type_of: dict[int, str]) -> dict[str, int]:
    """How many of ``client_ids`` each type has."""
    counts: dict[str, int] = {}
    for cid in client_ids:
        counts[type_of[cid]] = counts.get(type_of[cid], 0) + 1
    return counts


def _types_of(session: Session, client_ids: Sequence[int]) -> tuple[dict[int, str], set[int]]:
    """(client id → declared type of those of ``client_ids`` that are clients, those of them no
    longer active: revoked or departed). One statement on PostgreSQL, chunks on SQLite."""
    conn = session.connection()
    stmt = select(Client.id, Client.type_name, Client.status).where(
        one_of(_CLIENT_ID, "ids", conn.dialect.name)
    )
    ids = sorted(set(client_ids))
    rows = [r for part in ledger.chunks(conn, ids) for r in conn.execute(stmt, {"ids": part})]
    return {r[0]: r[1] for r in rows}, {r[0] for r in rows if r[2] != "active"}


def _purchases(session: Session, round_id: int) -> Sequence[Any]:
    """(client, price in micro-units) of the round's purchases not refunded, in booking order."""
    return session.execute(
        select(Purchase.client_id, Purchase.price_micros)
        .where(Purchase.round_id == round_id, Purchase.refunded.is_(False))
        .order_by(Purchase.id)
    ).all()


def _holds(
    session: Session, payload: SettlePayload, booked: list[int], purchases: Sequence[Any]
) -> tuple[dict[int, int], frozenset[int]]:
    """The round's join fees held (client → micro-units) and its revoked buyers; a round settled
    by rule drops every joiner holding a fee from ``booked`` in place (no charge, the hold back)."""
    fees = join_fees.held_in_round(session, payload.round_id)
    if payload.refund_buyers:
        booked[:] = [c for c in booked if c not in fees]
    return fees, _revoked(session, [p[0] for p in purchases])


def _revoked(session: Session, buyers: Sequence[int]) -> frozenset[int]:
    """The buyers among ``buyers`` the operator revoked: refunded at settlement (no model)."""
    if not buyers:
        return frozenset()
    rows = session.scalars(
        select(Client.id).where(Client.id.in_(sorted(set(buyers))), Client.status == "revoked")
    )
    return frozenset(rows)


def _mark(
    session: Session,
    round_id: int,
    dropped: list[int],
    refunded: bool,
    revoked: frozenset[int] = frozenset(),
) -> None:
    """The dropped participants' decisions, and on a refund every purchase (else the revoked
    buyers' purchases), marked set-based."""
    conn = session.connection()
    mark = (
        update(Decision)
        .where(
            Decision.round_id == round_id,
            one_of(_DECISION_CLIENT, "ids", conn.dialect.name),
        )
        .values(dropped=True)
    )
    for part in ledger.chunks(conn, dropped):
        conn.execute(mark, {"ids": part})
    if refunded:
        conn.execute(
            update(Purchase)
            .where(Purchase.round_id == round_id, Purchase.refunded.is_(False))
            .values(refunded=True)
        )
    elif revoked:
        conn.execute(
            update(Purchase)
            .where(Purchase.round_id == round_id, Purchase.client_id.in_(sorted(revoked)))
            .values(refunded=True)
        )


def publish(session: Session, round_id: int) -> MarketRound:
    """Make a settled round's model downloadable to its participants and buyers."""
    rnd = session.get(MarketRound, round_id, with_for_update=True)
    if rnd is None:
        raise RoundError(f"round_id: round {round_id} is not open at the market")
    if rnd.state == RoundState.SETTLING:
        if not rnd.artifact_path:
            raise RoundError(f"round_id: round {round_id} has no model artifact to publish")
        rnd.state = RoundState.PUBLISHED
    elif rnd.state != RoundState.PUBLISHED:
        raise RoundError(
            f"round_id: round {round_id} is {rnd.state}; only a settled round publishes"
        )
    session.flush()
    return rnd


def stored_quote(rnd: MarketRound) -> OpenRoundPayload:
    """The quote a round was opened with."""
    return OpenRoundPayload.model_validate(json.loads(rnd.quote_json))
