"""A client's best response to a published quote: its payoffs of Eq. (6) and one tie rule.

A client knows only its own type's cost C_i and what the market publishes (Section 3.C,
incomplete information): the price p, the reward r_i of its type, the predicted error ε of the
announced state and the announced targets K*_i (participants) and B*_i (buyers) of its type.
Taking that state as given, its payoffs are (Eq. 6)

    π(A) = 0,    π(J) = U(ε) − C_i + r_i,    π(B) = U(ε) − p,

and it picks the best. Under SWAN (Mechanism 1) π(J) = π(B) at the announced state K* (both are
τ[Φ(K*) − Φ0]), so every client of a type is indifferent between joining and buying there, and
the tie rule decides whether the announced state is reached.

**The tie rule.** The clients of a type form a queue; a client's *place* in it is a number ≥ 0.
Places [0, K*_i) are joining places, [K*_i, K*_i + B*_i) buying places, the rest abstaining
places. Among its best responses (payoffs within :data:`TIE_TOLERANCE` of the best) a client
takes the strategy of its place; if that strategy is not among them, the first of them in the
order buy, join, abstain (:data:`TIE_PREFERENCE`, the order the best-response dynamics of
:mod:`mots.economics.dynamics` use). A client that knows its rank r among its type (0, 1, …: the
platform's simulated clients, ranked by client id) uses place r, so that exactly K*_i join and
the next B*_i buy; a client that does not (an edge device) uses the place ``draw·(K*_i + B*_i)``
of a uniform draw in [0, 1) (:meth:`Targets.place_of_draw`), which joins with probability
K*_i / (K*_i + B*_i) and reproduces the announced state in expectation.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

TIE_TOLERANCE = 1e-6
"""Payoffs closer than one micro-unit of money are a tie (the market books money in micro-units)."""


class Strategy(enum.StrEnum):
    """A client's strategy s_n ∈ {A, J, B} (Eq. 2): abstain, join the training, buy the model."""

    ABSTAIN = "abstain"
    JOIN = "join"
    BUY = "buy"


TIE_PREFERENCE = (Strategy.BUY, Strategy.JOIN, Strategy.ABSTAIN)
"""Among tied best responses whose place strategy is not one of them, the first in this order."""


def join_payoff(utility: npt.ArrayLike, cost: npt.ArrayLike, reward: npt.ArrayLike) -> FloatArray:
    """π(J) = U(ε) − C_i + r_i (Eq. 6), element-wise with numpy broadcasting."""
    u = np.asarray(utility, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    return np.asarray(u - c + np.asarray(reward, dtype=np.float64), dtype=np.float64)


def buy_payoff(utility: npt.ArrayLike, price: npt.ArrayLike) -> FloatArray:
    """π(B) = U(ε) − p (Eq. 6), element-wise with numpy broadcasting."""
    u = np.asarray(utility, dtype=np.float64)
    return np.asarray(u - np.asarray(price, dtype=np.float64), dtype=np.float64)


def payoffs(
    utility: float, price: float, cost: float, reward: float | None
) -> dict[Strategy, float]:
    """One client's π for each strategy available to it (Eq. 6): A → 0, B, and J when its type
    has a published reward (``reward`` None: the market prices no such type, so it cannot join).

    ``utility`` is U(ε) at the announced state's ε; ``cost`` its C_i; ``price`` p.
    """
    out = {Strategy.ABSTAIN: 0.0, Strategy.BUY: float(buy_payoff(utility, price))}
    if reward is not None:
        out[Strategy.JOIN] = float(join_payoff(utility, cost, reward))
    return out


@dataclass(frozen=True)
class Targets:
    """The announced numbers of one type: K*_i participants and B*_i buyers."""

    participants: int
    buyers: int

    def __post_init__(self) -> None:
        if self.participants < 0:
            raise ValueError(f"participants: K*_i must be ≥ 0, got {self.participants}")
        if self.buyers < 0:
            raise ValueError(f"buyers: B*_i must be ≥ 0, got {self.buyers}")

    def strategy_at(self, place: float) -> Strategy:
        """The strategy of a place in the type's queue: J below K*_i, B below K*_i + B*_i, else A."""
        if place < self.participants:
            return Strategy.JOIN
        if place < self.participants + self.buyers:
            return Strategy.BUY
        return Strategy.ABSTAIN

    def place_of_draw(self, draw: float) -> float:
        """A uniform place among the targeted ones, ``draw·(K*_i + B*_i)``, for ``draw`` in [0, 1)."""
        if not 0.0 <= draw < 1.0:
            raise ValueError(f"draw: must lie in [0, 1), got {draw}")
        return draw * (self.participants + self.buyers)


@dataclass(frozen=True)
class Choice:
    """The chosen strategy, the payoff of every available strategy (Eq. 6) and why."""

    strategy: Strategy
    payoffs: Mapping[Strategy, float]
    reason: str


def best_response(
    payoffs: Mapping[Strategy, float],
    targets: Targets,
    place: float,
    tolerance: float = TIE_TOLERANCE,
) -> Choice:
    """argmax over the available strategies of their Eq. (6) payoffs, ties broken by the rule of
    this module's docstring: the strategy of the client's ``place`` in its type's queue
    (``targets``), else the first tied strategy in :data:`TIE_PREFERENCE`.

    ``payoffs`` holds the available strategies only (abstaining always is: π(A) = 0); ``−∞``
    marks a strategy that pays nothing sensible (e.g. buying where nobody trains).
    """
    if not payoffs:
        raise ValueError("payoffs: at least one strategy must be available")
    if any(math.isnan(v) or v == math.inf for v in payoffs.values()):
        raise ValueError(f"payoffs: must be finite or −∞, got {dict(payoffs)}")
    if not (math.isfinite(place) and place >= 0):
        raise ValueError(f"place: must be a finite number ≥ 0, got {place}")
    if not tolerance >= 0:
        raise ValueError(f"tolerance: must be ≥ 0, got {tolerance}")
    best = max(payoffs.values())
    tied = [s for s in TIE_PREFERENCE if s in payoffs and payoffs[s] >= best - tolerance]
    if len(tied) == 1:
        (only,) = tied
        return Choice(only, payoffs, f"{only.value} has the highest payoff ({best:.6f})")
    names = "/".join(s.value for s in tied)
    queued = targets.strategy_at(place)
    if queued in tied:
        return Choice(
            queued,
            payoffs,
            f"{names} tie; place {place:.3f} in the type's queue is a {queued.value} place "
            f"(K*={targets.participants}, B*={targets.buyers})",
        )
    pick = tied[0]
    return Choice(
        pick,
        payoffs,
        f"{names} tie; place {place:.3f} is a {queued.value} place (K*={targets.participants}, "
        f"B*={targets.buyers}), not a best response: {pick.value} by the tie preference",
    )
