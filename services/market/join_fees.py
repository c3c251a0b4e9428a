"""No model on credit (issue 37 #5): a participant whose type's quoted reward is a fee (r_i < 0)
joins only with the fee held from its wallet at join time, as a purchase is paid at purchase.

The rule. Declaring ``join`` in a round whose quote gives the client's type r_i < 0 moves |r_i|
from its wallet into the round's pool (a ``join_fee`` transaction) in the same transaction as the
decision, or is refused with 402 when the wallet holds less (nothing booked, no decision). A held
fee is final as a purchase is: the client cannot switch to buying or abstaining in that round.
At settlement (:func:`services.market.rounds.settle_round`) a participant that trained is charged
the captured fee (never more than the quoted one) out of its hold and refunded the rest; one that
dropped out, failed verification, left or was revoked, and every joiner of a round settled by rule,
is refunded the whole hold and gets no model.

A quote's participation bond B_i (:mod:`services.market.bonds`) is held here too, with the fee
and by the same rule: the wallet must hold the fee and the bond together (402 naming both).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import Session

from mots.platform.db import one_of
from mots.platform.money import from_micros, to_micros
from services.market import bonds, ledger
from services.market.errors import Conflict, PaymentRequired, Refusal
from services.market.models import Account, Base, Client, Entry, LedgerTransaction, MarketRound

JOIN_FEE = "join_fee"
"""The kind of the ledger transaction that holds a joiner's fee in the round's pool."""

_TXNS = Base.metadata.tables[LedgerTransaction.__tablename__]
_ENTRIES = Base.metadata.tables[Entry.__tablename__]
_ACCOUNTS = Base.metadata.tables[Account.__tablename__]


def held(
    conn: Connection, round_ids: Sequence[int], kind: str = JOIN_FEE
) -> dict[tuple[int, int], int]:
    """(round, client) → micro-units held as its join fee (``kind`` ``bond``: its bond), for
    the rounds ``round_ids``."""
    if not round_ids:
        return {}
    q = (
        select(_TXNS.c.round_id, _TXNS.c.client_id, func.sum(_ENTRIES.c.amount_micros))
        .join(_ENTRIES, _ENTRIES.c.transaction_id == _TXNS.c.id)
        .join(_ACCOUNTS, _ACCOUNTS.c.id == _ENTRIES.c.account_id)
        .where(
            _TXNS.c.kind == kind,
            one_of(_TXNS.c.round_id, "round_ids", conn.dialect.name),
            _ACCOUNTS.c.category != "wallets",
        )
        .group_by(_TXNS.c.round_id, _TXNS.c.client_id)
    )
    return {(r, c): int(m) for r, c, m in conn.execute(q, {"round_ids": list(round_ids)})}


def held_in_round(session: Session, round_id: int, kind: str = JOIN_FEE) -> dict[int, int]:
    """client → micro-units held as its join fee (or ``kind``) in ``round_id``."""
    return {c: m for (_, c), m in held(session.connection(), [round_id], kind).items()}


def _fees(
    conn: Connection, joins: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], tuple[int, int]]:
    """(round, client) → (fee, bond) in micro-units: the fee its type's quoted reward asks and
    the quote's bond for its type, where either is > 0."""
    round_ids = sorted({r for r, _ in joins})
    client_ids = sorted({c for _, c in joins})
    quotes = {
        rid: json.loads(q).get("rewards", {})
        for rid, q in conn.execute(
            select(MarketRound.id, MarketRound.quote_json).where(MarketRound.id.in_(round_ids))
        )
    }
    types = dict(
        conn.execute(select(Client.id, Client.type_name).where(Client.id.in_(client_ids))).all()
    )
    bonds = {
        rid: json.loads(q).get("bonds") or {}
        for rid, q in conn.execute(
            select(MarketRound.id, MarketRound.quote_json).where(MarketRound.id.in_(round_ids))
        )
    }
    out = {}
    for rid, cid in joins:
        reward = quotes.get(rid, {}).get(types.get(cid, ""))
        fee = max(0, -to_micros(reward)) if reward is not None else 0
        bond = bonds.get(rid, {}).get(types.get(cid, ""))
        held_bond = max(0, to_micros(bond)) if bond is not None else 0
        if fee > 0 or held_bond > 0:
            out[(rid, cid)] = (fee, held_bond)
    return out


def hold_join_fees(
    session: Session, wanted: Sequence[tuple[int, int, bool]]
) -> list[Refusal | None]:
    """Each accepted declaration (round, client, joins) in order, as if one after another: a
    join where the type pays a fee holds it (402 when the wallet holds less, nothing booked);
    a switch away from ``join`` once the fee is held is refused (409). The quote's bond is held
    with the fee, by the same rules. The refusal of each, or None."""
    conn = session.connection()
    rounds = sorted({r for r, _, _ in wanted})
    holding = set(held(conn, rounds)) | set(held(conn, rounds, bonds.BOND))
    fees = _fees(conn, sorted({(r, c) for r, c, j in wanted if j and (r, c) not in holding}))
    out: list[Refusal | None] = []
    for rid, cid, joins in wanted:
        if not joins:
            final = (rid, cid) in holding
            out.append(_final(rid, cid) if final else None)
        elif (rid, cid) in holding or (rid, cid) not in fees:
            out.append(None)
        else:
            out.append(_hold(session, rid, cid, fees[(rid, cid)]))
            if out[-1] is None:
                holding.add((rid, cid))
    return out


def _final(rid: int, cid: int) -> Refusal:
    return Conflict(
        "strategy",
        f"client {cid} paid its fee or bond to join round {rid}; joining is final, as a "
        "purchase is",
    )


def _hold(session: Session, rid: int, cid: int, due: tuple[int, int]) -> Refusal | None:
    """Move the fee into the round's pool and the bond into its bond account from the client's
    wallet, or the 402 of a wallet short of both together."""
    fee, bond = due
    wallet = ledger.ensure_account(session, ledger.wallet_name(cid), cid)
    balance = ledger.lock_accounts(session, [wallet])[wallet]
    if balance < fee + bond:
        parts = []
        if fee:
            parts.append(f"a fee of {from_micros(fee):f} (the type's quoted reward is negative)")
        if bond:
            parts.append(
                f"a participation bond of {from_micros(bond):f} (returned at settlement "
                "unless its update fails verification)"
            )
        return PaymentRequired(
            "strategy",
            f"joining round {rid} holds {' and '.join(parts)} from the wallet at join; the "
            f"wallet holds {from_micros(balance):f}",
        )
    if fee:
        shard = ledger.ensure_account(session, ledger.pool_shard_name(rid, cid))
        ledger.transfer(session, JOIN_FEE, wallet, shard, fee, rid, cid)
    if bond:
        bonds.hold(session, rid, cid, wallet, bond)
    return None
