"""Authorise-then-capture: the money a round settles, bounded by its quote and a subsidy budget.

The quote published when a round opens (price p and reward r_i per type at K*, Mechanism 1) is
the *authorisation*; the schedule re-priced at the realised state (K, B) is what settlement would
book. Capture bounds it, as a card payment's capture is bounded by its authorisation:

1. *Bounded by the quote.* Per type, the captured reward lies between 0 and the quoted one, on
   the quoted side: a quoted payout r_i > 0 pays at most r_i and never turns into a charge; a
   quoted charge r_i < 0 charges at most |r_i| and never turns into a payout. A buyer pays at most
   the quoted price (the realised price when lower; never below 0).
2. *Capped by the budget.* The platform's subsidy, Problem 1's incentive cost
   [Σ_i K_i c_i − Σ_i B_i c_p]⁺ at the captured terms, may not exceed the round's budget: if it
   would, every payout is scaled down by one pro-rata factor until it equals the budget (charges
   and the price are kept).
3. *The quote binds the platform too (honest first, issue 24).* A type i quoted a payout
   (r_i > 0) whose participants joined as quoted (declared joiners J_i ≤ K*_i: nobody of the
   type over-joined) is topped up from rules 1–2's terms to its quoted r_i, funded in this order
   by what rules 1–2 left the platform (the round's surplus: buyers' payments and charges beyond
   the payouts), the buyers' payments up to the quoted price (the refund of a lower realised
   price is withheld as far as needed) and the budget's headroom; if these cannot fund it all,
   every top-up is scaled by one pro-rata factor. A verified participant who joined as quoted is
   so paid its quote whenever the round's money and the budget can fund it, and the surplus that
   deviators leave funds the honest before the platform keeps any.

At K* with SWAN's terms the realised schedule equals the quoted one and Theorem 3's budget
balance (Σ_i B*_i p − K*_i r_i = 0 when W* > 0) makes the subsidy 0, so nothing is cut for any
budget ≥ 0, and rule 3 tops up nothing. Off K* rule 3 never raises a unilateral deviator's
money (a joiner beyond K*_i over-joins its type, which then gets rules 1–2's terms; a buyer pays
at least rules 1–2's price), so no deviation from K* unprofitable under rules 1–2 becomes
profitable (docs/mechanisms.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

MAX_SCALE_STEPS = 8
"""Downward nudges of the pro-rata factor when rounding to the quantum left the subsidy above
the budget (floating point only; each nudge lowers the factor by a relative 1e-12)."""


@dataclass(frozen=True)
class Capture:
    """The captured terms of one or many realised states (leading axes as the inputs').

    ``rewards`` has the quoted rewards' shape (…, I); every other field has the leading shape.
    """

    price: FloatArray
    """c_p: what each paid buyer is charged, 0 ≤ c_p ≤ quoted p."""
    rewards: FloatArray
    """c_i per participant of type i: > 0 paid, < 0 charged; between 0 and the quoted r_i."""
    subsidy: FloatArray
    """[Σ_i K_i c_i − Σ_i B_i c_p]⁺, the platform's outflow at the captured terms (≤ budget)."""
    uncapped_subsidy: FloatArray
    """The same at the realised (re-priced) terms, before capture."""
    bounded: BoolArray
    """Rule 1 changed something: a realised term lay beyond the quote."""
    scale: FloatArray
    """Rule 2's pro-rata factor on payouts (1: the budget did not bind)."""
    top_up: FloatArray = field(default_factory=lambda: np.zeros(0))
    """Rule 3's addition per participant of each type (…, I), included in ``rewards``."""
    top_up_scale: FloatArray = field(default_factory=lambda: np.ones(()))
    """Rule 3's pro-rata factor on the top-ups (1: fully funded, or nothing to top up)."""

    @property
    def scaled(self) -> BoolArray:
        """Rule 2 applied: the payouts were scaled down to the budget."""
        return np.asarray(self.scale < 1.0)

    def rule(self) -> str:
        """The stated rule applied (for a single state): what the settlement says it did."""
        parts = []
        if bool(np.any(self.bounded)):
            parts.append("realised terms bounded by the quote")
        if bool(np.any(self.scaled)):
            parts.append(f"payouts scaled by {float(np.min(self.scale)):.6f} to the subsidy budget")
        if bool(np.any(self.top_up > 0)):
            part = "honest participants topped up to the quote"
            if bool(np.any(self.top_up_scale < 1.0)):
                part += f" (top-ups scaled by {float(np.min(self.top_up_scale)):.6f})"
            parts.append(part)
        return "; ".join(parts) or "captured as realised"


def bound_by_quote(quoted: npt.ArrayLike, realised: npt.ArrayLike) -> FloatArray:
    """Rule 1 per type: the realised amount clipped to [min(q, 0), max(q, 0)]."""
    q = np.asarray(quoted, dtype=np.float64)
    r = np.asarray(realised, dtype=np.float64)
    return np.asarray(np.clip(r, np.minimum(q, 0.0), np.maximum(q, 0.0)), dtype=np.float64)


def _floor(x: FloatArray, quantum: float) -> FloatArray:
    if quantum <= 0:
        return x
    return np.asarray(np.floor(x / quantum) * quantum, dtype=np.float64)


def capture(
    quoted_price: npt.ArrayLike,
    quoted_rewards: npt.ArrayLike,
    realised_price: npt.ArrayLike,
    realised_rewards: npt.ArrayLike,
    participants: npt.ArrayLike,
    buyers: npt.ArrayLike,
    budget: npt.ArrayLike,
    *,
    quantum: float = 0.0,
    slack: float = 0.0,
    quoted_participants: npt.ArrayLike | None = None,
    joined: npt.ArrayLike | None = None,
) -> Capture:
    """Captured terms of realised states under a quote and a subsidy budget (rules 1 to 3).

    ``participants`` and ``buyers`` are K_i and B_i per type (…, I): the participants paid or
    charged and the buyers who paid. With ``quantum`` > 0 (e.g. 1 when amounts are micro-units)
    scaled payouts are floored to a multiple of it, so rounding never lifts the subsidy above the
    budget. A subsidy within ``slack`` above the budget is floating-point noise, not cut (the
    ledger's micro-units need none). Inputs broadcast: one quote against many realised states is
    one call. Rule 3 applies when ``quoted_participants`` (K*_i per type) is given; ``joined``
    counts the declared joiners J_i per type (default ``participants``; a joiner that dropped out
    or was removed still counts, so a type that over-joined is never topped up).
    """
    k = np.asarray(participants, dtype=np.float64)
    b = np.asarray(buyers, dtype=np.float64)
    q_r = np.asarray(quoted_rewards, dtype=np.float64)
    price = np.clip(
        np.asarray(realised_price, dtype=np.float64),
        0.0,
        np.maximum(np.asarray(quoted_price, dtype=np.float64), 0.0),
    )
    rewards = bound_by_quote(q_r, realised_rewards)
    realised = np.asarray(realised_rewards, dtype=np.float64)
    income = b.sum(axis=-1) * price + (k * np.maximum(-rewards, 0.0)).sum(axis=-1)
    payouts = (k * np.maximum(rewards, 0.0)).sum(axis=-1)
    cap = np.maximum(np.asarray(budget, dtype=np.float64), 0.0)
    uncapped = np.maximum(
        (k * realised).sum(axis=-1) - b.sum(axis=-1) * np.asarray(realised_price, np.float64), 0.0
    )
    bounded = np.any(rewards != realised, axis=-1) | (
        price != np.asarray(realised_price, dtype=np.float64)
    )
    binds = payouts - income > cap + slack
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.where(binds, np.clip((cap + income) / payouts, 0.0, 1.0), 1.0)
    for _ in range(MAX_SCALE_STEPS):
        captured = np.where(rewards > 0, _floor(rewards * scale[..., None], quantum), rewards)
        paid = (k * np.maximum(captured, 0.0)).sum(axis=-1)
        over = binds & (paid - income > cap + slack)
        if not np.any(over):
            break
        scale = np.where(over, scale * (1.0 - 1e-12), scale)
    else:  # rounding never settled under the cap: pay nothing beyond the charges (stated rule)
        scale = np.where(over, 0.0, scale)
        captured = np.where(rewards > 0, _floor(rewards * scale[..., None], quantum), rewards)
        paid = (k * np.maximum(captured, 0.0)).sum(axis=-1)
    top_up = np.zeros_like(captured)
    top_scale = np.ones_like(np.asarray(paid, dtype=np.float64))
    if quoted_participants is not None:
        honest = (
            (q_r > 0)
            & (k > 0)
            & (
                np.asarray(k if joined is None else joined, np.float64)
                <= np.asarray(quoted_participants, np.float64)
            )
        )
        room = (
            np.maximum(income - paid, 0.0),  # rules 1-2's surplus
            b.sum(axis=-1) * (np.maximum(np.asarray(quoted_price, np.float64), 0.0) - price),
            np.maximum(cap - np.maximum(paid - income, 0.0), 0.0),  # the budget's headroom
        )
        top_up, top_scale, price = _honest_first(
            np.where(honest, np.maximum(q_r - captured, 0.0), 0.0), k, b, price, room, quantum
        )
        captured = captured + top_up
        paid = (k * np.maximum(captured, 0.0)).sum(axis=-1)
        income = b.sum(axis=-1) * price + (k * np.maximum(-captured, 0.0)).sum(axis=-1)
    subsidy = np.maximum(paid - income, 0.0)
    return Capture(
        price=np.asarray(price, dtype=np.float64),
        rewards=np.asarray(captured, dtype=np.float64),
        subsidy=np.asarray(subsidy, dtype=np.float64),
        uncapped_subsidy=np.asarray(uncapped, dtype=np.float64),
        bounded=np.asarray(bounded, dtype=np.bool_),
        scale=np.asarray(scale, dtype=np.float64),
        top_up=np.asarray(top_up, dtype=np.float64),
        top_up_scale=np.asarray(top_scale, dtype=np.float64),
    )


def _honest_first(
    short: FloatArray,
    k: FloatArray,
    b: FloatArray,
    price: FloatArray,
    room: tuple[FloatArray, FloatArray, FloatArray],
    quantum: float,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Rule 3: (top-up per participant of each type, its pro-rata factor, the buyers' price).

    ``short`` is what each honest type's participants lack of their quote; ``room`` the funds in
    the order they are drawn: the surplus, the withheld refund (≤ B·(quoted p − c_p)) and the
    budget's headroom. The price rises only by what the surplus does not cover (rounded up to
    the quantum and never above the quote), so the subsidy stays within the budget.
    """
    surplus, refund, headroom = room
    need = (k * short).sum(axis=-1)
    available = surplus + refund + headroom
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        factor = np.where(need > available, np.clip(available / need, 0.0, 1.0), 1.0)
    top = _floor(short * factor[..., None], quantum)
    drawn = np.clip((k * top).sum(axis=-1) - surplus, 0.0, refund)
    buyers = b.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = np.where(buyers > 0, drawn / buyers, 0.0)
    if quantum > 0:
        rise = np.ceil(rise / quantum) * quantum
    ceiling = price + np.where(buyers > 0, refund / np.maximum(buyers, 1.0), 0.0)
    new_price = np.minimum(price + rise, ceiling)
    return (
        np.asarray(top, dtype=np.float64),
        np.asarray(factor, dtype=np.float64),
        np.asarray(new_price, dtype=np.float64),
    )
