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

At K* with SWAN's terms the realised schedule equals the quoted one and Theorem 3's budget
balance (Σ_i B*_i p − K*_i r_i = 0 when W* > 0) makes the subsidy 0, so nothing is cut for any
budget ≥ 0 (docs/mechanisms.md discusses what the bounds change off K*).
"""

from __future__ import annotations

from dataclasses import dataclass

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
) -> Capture:
    """Captured terms of realised states under a quote and a subsidy budget (rules 1 and 2).

    ``participants`` and ``buyers`` are K_i and B_i per type (…, I): the participants paid or
    charged and the buyers who paid. With ``quantum`` > 0 (e.g. 1 when amounts are micro-units)
    scaled payouts are floored to a multiple of it, so rounding never lifts the subsidy above the
    budget. A subsidy within ``slack`` above the budget is floating-point noise, not cut (the
    ledger's micro-units need none). Inputs broadcast: one quote against many realised states is
    one call.
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
    subsidy = np.maximum(paid - income, 0.0)
    return Capture(
        price=np.asarray(price, dtype=np.float64),
        rewards=np.asarray(captured, dtype=np.float64),
        subsidy=np.asarray(subsidy, dtype=np.float64),
        uncapped_subsidy=np.asarray(uncapped, dtype=np.float64),
        bounded=np.asarray(bounded, dtype=np.bool_),
        scale=np.asarray(scale, dtype=np.float64),
    )
