"""The participation bond (issue 37 #6): held from a joiner's wallet at join, slashed on a failed
verification, returned at settlement otherwise.

The rule. A round's quote may carry a bond B_i per type (:class:`OpenRoundPayload.bonds`, sized
by :func:`mots.economics.bond.participation_bond` so that shirking does not pay in expectation).
Declaring ``join`` moves B_i from the wallet into the round's bond account (a ``bond``
transaction) in the same transaction as the decision and any join fee
(:mod:`services.market.join_fees`), or is refused with 402 when the wallet holds less than the
fee and the bond together (nothing booked, no decision). A held bond makes joining final, as a
held fee does. At settlement (:func:`services.market.rounds.settle_round`) a participant named in
``failed_verification`` forfeits its bond to ``platform:surplus`` (``bond_slash``); every other
bond (trained, dropped out, left, revoked, or any joiner of a round settled by rule) goes back to
its wallet whole (``bond_refund``). The bond accounts end every settlement at zero.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlalchemy.orm import Session

from services.market import ledger

BOND = "bond"
"""The kind of the ledger transaction that holds a joiner's bond."""
BOND_REFUND = "bond_refund"
BOND_SLASH = "bond_slash"


def shard_name(round_id: int, client_id: int) -> str:
    """The bond account a client's bond in ``round_id`` is held in (sharded as the pool is, so
    concurrent joiners do not queue on one row)."""
    return f"round:{round_id}:bonds:{client_id % ledger.POOL_SHARDS}"


def hold(session: Session, round_id: int, client_id: int, wallet: int, bond: int) -> None:
    """Move ``bond`` micro-units (> 0) from the client's ``wallet`` into its bond account (the
    caller has checked the balance under the wallet's lock)."""
    shard = ledger.ensure_account(session, shard_name(round_id, client_id))
    ledger.transfer(session, BOND, wallet, shard, bond, round_id, client_id)


def settlement_moves(
    session: Session,
    round_id: int,
    bonds: Mapping[int, int],
    wallets: Mapping[int, int],
    surplus: int,
    slashed: Collection[int],
) -> tuple[list[ledger.Transfer], int, int]:
    """(transfers, micro-units returned, micro-units slashed) that empty the round's bond
    accounts: each bond of a client in ``slashed`` to ``surplus``, every other to its wallet."""
    moves: list[ledger.Transfer] = []
    returned = slashed_total = 0
    for cid in sorted(bonds):
        shard = ledger.ensure_account(session, shard_name(round_id, cid))
        if cid in slashed:
            moves.append((BOND_SLASH, shard, surplus, bonds[cid], round_id, cid))
            slashed_total += bonds[cid]
        else:
            moves.append((BOND_REFUND, shard, wallets[cid], bonds[cid], round_id, cid))
            returned += bonds[cid]
    return moves, returned, slashed_total
