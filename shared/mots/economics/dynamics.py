"""Clients' asynchronous best-response dynamics under a published mechanism (Eq. 6, Section 3.C).

Each client knows only the schedule p(K), r_i(K) and the current aggregate state, and picks
A (payoff 0), J (U(ε(K')) − C_i + r_i(K')) or B (U(ε(K')) − p(K')), K' being the state after its own
move (or what the mechanism says clients expect, :meth:`Mechanism.expected_state`). One client moves
at a time and only to a strictly better strategy; the last participant cannot leave (nobody could buy
a model that nobody trains). Clients of one type in one strategy are interchangeable, so the
dynamics runs over (type, strategy) classes and moves a class's clients one after another in a block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

import numpy as np
import numpy.typing as npt

from mots.economics.error import generalization_error
from mots.economics.mechanisms.base import Mechanism
from mots.economics.scenario import Scenario
from mots.economics.welfare import welfare_mots

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Reason = Literal["equilibrium", "cycle", "move limit"]
Order = Literal["deterministic", "random"]

DEFAULT_MAX_MOVES = 1_000_000
REL_TOL = 1e-12
"""A move must gain more than the mechanism's noise floor + REL_TOL·|payoffs|: float noise is no incentive."""
_MAX_CHUNK = 1 << 14


class Strategy(IntEnum):
    """A client's strategy s_n (Eq. 5's cases): abstain, join training, buy the model."""

    A = 0
    J = 1
    B = 2


@dataclass(frozen=True)
class Step:
    """A block of ``count`` clients of one type moving from one strategy to another, and the state after."""

    type_index: int
    source: Strategy
    target: Strategy
    count: int
    participants: IntArray
    buyers: IntArray


@dataclass(frozen=True)
class DynamicsResult:
    """Where the dynamics stopped, after how many single-client moves, and why."""

    final_participants: IntArray
    final_buyers: IntArray
    moves: int
    welfare: float
    """W_MoTS of the final state (Eq. 5)."""
    epsilon: float
    converged: bool
    reason: Reason
    trajectory: list[Step] | None = field(default=None, repr=False)


def _validated_start(
    scenario: Scenario, participants: npt.ArrayLike, buyers: npt.ArrayLike | None
) -> tuple[IntArray, IntArray]:
    """Check 0 ≤ K_i ≤ N_i and 0 ≤ B_i ≤ N_i − K_i; default B = N − K (those not training buy)."""
    n = scenario.counts
    k = np.asarray(participants)
    if k.shape != n.shape or not np.all(np.equal(np.mod(k, 1), 0)):
        raise ValueError(f"start_participants: need {n.size} integer counts, got {k.tolist()}")
    k = k.astype(np.int64)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError(f"start_participants: need 0 ≤ K_i ≤ N_i = {n.tolist()}, got {k.tolist()}")
    if buyers is None:
        return k, n - k
    b = np.asarray(buyers)
    if b.shape != n.shape or not np.all(np.equal(np.mod(b, 1), 0)):
        raise ValueError(f"start_buyers: need {n.size} integer counts, got {b.tolist()}")
    b = b.astype(np.int64)
    if np.any(b < 0) or np.any(b > n - k):
        raise ValueError(
            f"start_buyers: need 0 ≤ B_i ≤ N_i − K_i = {(n - k).tolist()}, got {b.tolist()}"
        )
    return k, b


def _best_responses(
    mechanism: Mechanism, states: IntArray, type_index: int, source: Strategy
) -> tuple[IntArray, FloatArray]:
    """For a class-(type, source) mover facing each state (rows): its best strategy and its gain."""
    t = states.shape[0]
    e = np.zeros(states.shape[1], dtype=np.int64)
    e[type_index] = 1
    base = states - e if source == Strategy.J else states
    exp_join = mechanism.expected_state(states, base + e)
    exp_out = mechanism.expected_state(states, base)
    join, buy = mechanism.payoffs(np.concatenate([exp_join, exp_out]))
    pay = np.empty((t, 3), dtype=np.float64)
    pay[:, Strategy.A] = 0.0
    pay[:, Strategy.J] = join[:t, type_index]
    pay[:, Strategy.B] = buy[t:]
    if source == Strategy.J:
        last = states.sum(axis=1) == 1
        pay[last, Strategy.A] = -np.inf
        pay[last, Strategy.B] = -np.inf
    sources = np.full(t, int(source), dtype=np.int64)
    return best_alternative(pay, sources, mechanism.noise_floor())


def best_alternative(
    pay: FloatArray, sources: IntArray, noise_floor: float
) -> tuple[IntArray, FloatArray]:
    """Each mover's best other strategy and its gain over staying (0 where no strict gain).

    ``pay[..., s]`` holds π of Eq. (6) for strategy s (A, J, B) of a mover now playing
    ``sources[...]``. Alternatives within the noise floor + REL_TOL·|π| of the best are equally
    good (float noise decides nothing) and the first of B, J, A among them is taken; a move
    counts only if it gains more than that same margin.
    """
    strategies = np.arange(3)
    others = strategies != sources[..., None]
    alt = np.where(others, pay, -np.inf)
    top = alt.max(axis=-1)
    band = noise_floor + REL_TOL * np.where(np.isfinite(top), np.abs(top), 0.0)
    with np.errstate(invalid="ignore"):
        near = others & (alt >= (top - band)[..., None])
    best = np.where(near[..., 2], 2, np.where(near[..., 1], 1, 0)).astype(np.int64)
    best_pay = np.take_along_axis(alt, best[..., None], axis=-1)[..., 0]
    current = np.take_along_axis(pay, sources[..., None], axis=-1)[..., 0]
    finite = np.where(np.isfinite(current), np.abs(current), 0.0)
    size = np.maximum(finite, np.where(np.isfinite(best_pay), np.abs(best_pay), 0.0))
    with np.errstate(invalid="ignore"):
        gain = best_pay - current
    gain = np.where(gain > noise_floor + REL_TOL * size, gain, 0.0)
    return best, np.nan_to_num(gain, nan=0.0, posinf=np.inf)


def _class_size(k: IntArray, b: IntArray, n: IntArray, i: int, s: Strategy) -> int:
    if s == Strategy.J:
        return int(k[i])
    if s == Strategy.B:
        return int(b[i])
    return int(n[i] - k[i] - b[i])


def _apply(
    k: IntArray, b: IntArray, i: int, source: Strategy, target: Strategy, count: int
) -> None:
    """Move ``count`` type-i clients from ``source`` to ``target`` (in place)."""
    for s, sign in ((source, -count), (target, count)):
        if s == Strategy.J:
            k[i] += sign
        elif s == Strategy.B:
            b[i] += sign


def _block_length(
    mechanism: Mechanism, k: IntArray, i: int, source: Strategy, target: Strategy, available: int
) -> int:
    """How many clients of class (i, source) in a row still strictly prefer ``target`` (≤ available)."""
    delta = 0
    if source == Strategy.J:
        delta = -1
    elif target == Strategy.J:
        delta = 1
    if delta == 0:
        return (
            available  # A ↔ B leaves K unchanged: every client of the class faces the same choice
        )
    moved, chunk = 0, 1
    while moved < available:
        t = np.arange(moved, min(available, moved + chunk), dtype=np.int64)
        states = k[None, :] + np.outer(t * delta, np.eye(k.size, dtype=np.int64)[i])
        best, gain = _best_responses(mechanism, states, i, source)
        ok = (best == int(target)) & (gain > 0)
        if not ok.all():
            return moved + int(np.argmin(ok))
        moved += t.size
        chunk = min(2 * chunk, _MAX_CHUNK)
    return moved


def run_dynamics(
    scenario: Scenario,
    mechanism: Mechanism,
    start_participants: npt.ArrayLike | None = None,
    start_buyers: npt.ArrayLike | None = None,
    max_moves: int = DEFAULT_MAX_MOVES,
    order: Order = "deterministic",
    seed: int | None = None,
    record: bool = False,
) -> DynamicsResult:
    """Asynchronous best responses from (K, B) until no client gains, a state repeats, or max_moves.

    ``start_participants=None`` uses the mechanism's own start (e.g. the empty network for the
    Dynamic baseline) or else K = 0; ``start_buyers=None`` means those not training buy.
    "deterministic" sweeps the classes (type 1..I × J, B, A) in order, moving a block of one class's
    clients one at a time while each still gains; "random" moves one client at a time, drawn
    uniformly (seeded) among the clients that have a strictly better strategy.
    """
    if mechanism.scenario is not scenario and mechanism.scenario != scenario:
        raise ValueError("mechanism: was built for another scenario")
    if max_moves < 0:
        raise ValueError(f"max_moves: must be ≥ 0, got {max_moves}")
    if order not in ("deterministic", "random"):
        raise ValueError(f"order: must be 'deterministic' or 'random', got {order!r}")
    if start_participants is None:
        own = mechanism.start_state()
        if own is not None and start_buyers is None:
            start_participants, start_buyers = own
        elif own is not None:
            start_participants = own[0]
        else:
            start_participants = np.zeros(scenario.n_types, dtype=np.int64)
    k, b = _validated_start(scenario, start_participants, start_buyers)
    k, b = k.copy(), b.copy()
    trajectory: list[Step] | None = [] if record else None
    if order == "deterministic":
        moves, reason = _sweep(scenario, mechanism, k, b, max_moves, trajectory)
    else:
        moves, reason = _random(
            scenario, mechanism, k, b, max_moves, np.random.default_rng(seed), trajectory
        )
    eps = float(generalization_error(k, scenario.sizes, scenario.error_model))
    return DynamicsResult(
        final_participants=k,
        final_buyers=b,
        moves=moves,
        welfare=float(welfare_mots(scenario, k, b)),
        epsilon=eps,
        converged=reason == "equilibrium",
        reason=reason,
        trajectory=trajectory,
    )


def _sweep(
    scenario: Scenario,
    mechanism: Mechanism,
    k: IntArray,
    b: IntArray,
    max_moves: int,
    trajectory: list[Step] | None,
) -> tuple[int, Reason]:
    n = scenario.counts
    seen: set[bytes] = set()
    moves = 0
    while True:
        key = k.tobytes() + b.tobytes()
        if key in seen:
            return moves, "cycle"
        seen.add(key)
        moved_this_sweep = False
        for i in range(scenario.n_types):
            for source in (Strategy.J, Strategy.B, Strategy.A):
                size = _class_size(k, b, n, i, source)
                if size == 0:
                    continue
                best, gain = _best_responses(mechanism, k[None, :], i, source)
                if gain[0] <= 0:
                    continue
                if moves >= max_moves:
                    return moves, "move limit"
                target = Strategy(int(best[0]))
                count = max(
                    1, _block_length(mechanism, k, i, source, target, min(size, max_moves - moves))
                )
                _apply(k, b, i, source, target, count)
                moves += count
                moved_this_sweep = True
                if trajectory is not None:
                    trajectory.append(Step(i, source, target, count, k.copy(), b.copy()))
        if not moved_this_sweep:
            return moves, "equilibrium"


def _random(
    scenario: Scenario,
    mechanism: Mechanism,
    k: IntArray,
    b: IntArray,
    max_moves: int,
    rng: np.random.Generator,
    trajectory: list[Step] | None,
) -> tuple[int, Reason]:
    n = scenario.counts
    seen: set[bytes] = set()
    moves = 0
    while True:
        key = k.tobytes() + b.tobytes()
        if key in seen:
            return moves, "cycle"
        seen.add(key)
        options: list[tuple[int, Strategy, Strategy, int]] = []
        for i in range(scenario.n_types):
            for source in (Strategy.J, Strategy.B, Strategy.A):
                size = _class_size(k, b, n, i, source)
                if size == 0:
                    continue
                best, gain = _best_responses(mechanism, k[None, :], i, source)
                if gain[0] > 0:
                    options.append((i, source, Strategy(int(best[0])), size))
        if not options:
            return moves, "equilibrium"
        if moves >= max_moves:
            return moves, "move limit"
        weights = np.array([o[3] for o in options], dtype=np.float64)
        i, source, target, _ = options[int(rng.choice(len(options), p=weights / weights.sum()))]
        _apply(k, b, i, source, target, 1)
        moves += 1
        if trajectory is not None:
            trajectory.append(Step(i, source, target, 1, k.copy(), b.copy()))
