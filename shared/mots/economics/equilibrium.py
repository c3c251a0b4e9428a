"""Is a social state {K, B} an equilibrium of a published schedule? One unilateral-deviation check.

Problem 1's constraint (Pb1client) asks that every client's strategy s*_n maximise its payoff
π_n(s_n, s*_−n) of Eq. (6) given everyone else's. Clients of one type in one strategy are
interchangeable, so it suffices to look at the 3I classes (type i, strategy s) with at least one
client: a class-(i, J) client that leaves faces K − e_i, a class-(i, A) or (i, B) client that joins
faces K + e_i, and a move between A and B leaves K as it is. Every payoff a mover compares is
therefore evaluated at one of the 2I + 1 states K, K ± e_i (or at what the mechanism says a mover
expects there, :meth:`Mechanism.expected_state`), in one batched call of
:meth:`Mechanism.payoffs`: O(I) states whatever the population, no enumeration of social states.

The rules are those of the best-response dynamics (:mod:`mots.economics.dynamics`): a move counts
only if it gains more than the mechanism's noise floor plus ``REL_TOL``·|payoffs|, the last
participant cannot leave (nobody could buy a model that nobody trains), buying where K = 0 is
impossible (−∞), and among equally good alternatives (within the same margin) B is preferred to
J to A (:func:`mots.economics.dynamics.best_alternative`). Hence
``check_equilibrium(...).equilibrium`` is exactly "the dynamics started at (K, B) makes no move".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mots.economics.dynamics import Strategy, best_alternative
from mots.economics.mechanisms.base import Mechanism

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Deviation:
    """The ``clients`` clients of type ``type_index`` playing ``source`` each gain ``gain`` by ``target``."""

    type_index: int
    source: Strategy
    target: Strategy
    gain: float
    clients: int


@dataclass(frozen=True)
class EquilibriumCheck:
    """Whether no client gains by a unilateral move at (K, B), and every class that would."""

    participants: IntArray
    buyers: IntArray
    deviations: tuple[Deviation, ...]
    """Classes with a strictly improving move, largest gain first (empty at an equilibrium)."""

    @property
    def equilibrium(self) -> bool:
        """True when no client of any type gains by changing its strategy alone (Pb1client)."""
        return not self.deviations


def _validated(
    mechanism: Mechanism, participants: npt.ArrayLike, buyers: npt.ArrayLike
) -> tuple[IntArray, IntArray]:
    """0 ≤ K_i, 0 ≤ B_i and K_i + B_i ≤ N_i, one integer count per type."""
    n = mechanism.scenario.counts
    out = []
    for name, value in (("participants", participants), ("buyers", buyers)):
        arr = np.asarray(value)
        if arr.shape != n.shape or not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError(f"{name}: need {n.size} integer counts, got {arr.tolist()}")
        out.append(arr.astype(np.int64))
    k, b = out
    if np.any(k < 0) or np.any(b < 0) or np.any(k + b > n):
        raise ValueError(
            f"participants, buyers: need K_i, B_i ≥ 0 and K_i + B_i ≤ N_i = {n.tolist()}, "
            f"got K = {k.tolist()}, B = {b.tolist()}"
        )
    return k, b


def strategy_payoffs(mechanism: Mechanism, participants: npt.ArrayLike) -> FloatArray:
    """π of Eq. (6) that a type-i client compares at K: shape (I, 3 sources, 3 strategies).

    Row [i, s] holds the payoffs of A, J and B for a type-i client now playing s: a participant
    (s = J) that leaves faces K − e_i, a client outside the coalition that joins faces K + e_i.
    Entries of classes that are empty at K (s = J with K_i = 0; s = A or B with K_i = N_i) are
    computed at states clipped to 0 ≤ K ≤ N and mean nothing. The last participant's alternatives
    are −∞.
    """
    k = np.asarray(participants, dtype=np.int64)
    n = mechanism.scenario.counts
    i_types = k.size
    eye = np.eye(i_types, dtype=np.int64)
    after = np.concatenate([k[None, :], np.minimum(k + eye, n[None, :]), np.maximum(k - eye, 0)])
    current = np.broadcast_to(k, after.shape).copy()
    join, buy = mechanism.payoffs(mechanism.expected_state(current, after))
    here, up, down = 0, np.arange(1, i_types + 1), np.arange(i_types + 1, 2 * i_types + 1)
    idx = np.arange(i_types)
    pay = np.zeros((i_types, 3, 3), dtype=np.float64)
    pay[:, Strategy.J, Strategy.J] = join[here, idx]
    pay[:, Strategy.J, Strategy.B] = buy[down]
    if int(k.sum()) == 1:
        pay[:, Strategy.J, Strategy.A] = -np.inf
        pay[:, Strategy.J, Strategy.B] = -np.inf
    for s in (Strategy.A, Strategy.B):
        pay[:, s, Strategy.J] = join[up, idx]
        pay[:, s, Strategy.B] = buy[here]
    return pay


def _gains(mechanism: Mechanism, pay: FloatArray) -> tuple[IntArray, FloatArray]:
    """Best alternative (I, 3) per class and its gain over staying (0 where no strict gain)."""
    sources = np.broadcast_to(np.arange(3, dtype=np.int64), pay.shape[:2])
    return best_alternative(pay, sources, mechanism.noise_floor())


def check_equilibrium(
    mechanism: Mechanism, participants: npt.ArrayLike, buyers: npt.ArrayLike
) -> EquilibriumCheck:
    """Every class (type, strategy) of clients at (K, B) that gains by a unilateral move (Eq. 6).

    O(I) payoff evaluations in one batch (see the module docstring); the population size only
    enters through the counts. ``EquilibriumCheck.equilibrium`` is True when there is none.
    """
    k, b = _validated(mechanism, participants, buyers)
    n = mechanism.scenario.counts
    sizes = np.stack([n - k - b, k, b], axis=1)
    best, gain = _gains(mechanism, strategy_payoffs(mechanism, k))
    moving = (sizes > 0) & (gain > 0)
    found = [
        Deviation(
            int(i), Strategy(int(s)), Strategy(int(best[i, s])), float(gain[i, s]), int(sizes[i, s])
        )
        for i, s in zip(*np.nonzero(moving), strict=True)
    ]
    found.sort(key=lambda d: (-d.gain, d.type_index, int(d.source)))
    return EquilibriumCheck(k, b, tuple(found))


__all__ = ["Deviation", "EquilibriumCheck", "check_equilibrium", "strategy_payoffs"]
