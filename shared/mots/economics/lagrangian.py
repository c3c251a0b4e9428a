"""SWAN's Lagrangian L(K) (Eq. 12), its multiplier λ, and the multilinear interpolation θ(K) (Eq. 11).

L(K) = Σ_i [N_i U(ε(K)) − K_i C_i] + λ g(K), where g(K) ≥ 0 exactly when ε(K) ≤ ε_req. The paper's
g is (ε − σ²)^−1 − (ε_req − σ²)^−1; with the offset ε0 the shift is σ² + ε0 (the Eq. 3 part of ε
is compared with ε_req − ε0). Where ε − ε0 − σ² ≤ 0 (possible in the high regime) that reciprocal
jumps from −∞ to +∞ and stops being monotone in ε, so there the unshifted ε^−1 − ε_req^−1 is used
(the same constraint, monotone, finite for every ε > 0). λ is chosen over a finite domain of states
so that the constrained optimum K* maximises L there (see :func:`supporting_multiplier`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from mots.economics.error import error_from_totals, generalization_error
from mots.economics.exhaustive import state_count
from mots.economics.scenario import Scenario

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ConstraintForm = Literal["none", "shifted", "unshifted"]

MAX_THETA_TYPES = 24
"""θ stores L on 2^I vertices; beyond 2^24 vertices the tensor no longer fits comfortably in memory."""

MAX_GRID_STATES = 200_000
"""High regime: enumerate every state when Π(N_i + 1) is at most this, else use candidate states."""


def regime_split(scenario: Scenario) -> tuple[IntArray, IntArray]:
    """(I_L, I_H) of Proposition 1: I_H = {i : D_i > dγ²/σ²} (empty when σ² = 0), as type indices."""
    em = scenario.error_model
    high = em.sigma2 * scenario.sizes > em.d_gamma2
    idx = np.arange(scenario.n_types, dtype=np.int64)
    return idx[~high], idx[high]


def constraint_shift(scenario: Scenario) -> float:
    """σ² + ε0: the error level that the paper's term (ε − σ²)^−1 in Eq. (12) is measured from."""
    return scenario.error_model.sigma2 + scenario.error_model.eps0


def constraint_term(scenario: Scenario, epsilon: npt.ArrayLike, form: ConstraintForm) -> FloatArray:
    """g(ε): the bracket multiplying λ in Eq. (12), for ε given per state (ε = +∞: no model, g = −ε_req^−1-like).

    "shifted" is the paper's (ε − ε0 − σ²)^−1 − (ε_req − ε0 − σ²)^−1, "unshifted" is
    ε^−1 − ε_req^−1, "none" (no ε_req) is 0. Each is ≥ 0 iff ε ≤ ε_req where it is used.
    """
    e = np.asarray(epsilon, dtype=np.float64)
    if form == "none":
        return np.zeros_like(e)
    shift = constraint_shift(scenario) if form == "shifted" else 0.0
    req = scenario.eps_req_value
    with np.errstate(divide="ignore"):
        return np.asarray(1.0 / (e - shift) - 1.0 / (req - shift), dtype=np.float64)


def choose_constraint_form(scenario: Scenario, min_epsilon: float) -> ConstraintForm:
    """The paper's shifted form where it is monotone over the domain (every ε and ε_req above ε0 + σ²), else unshifted."""
    if scenario.eps_req is None:
        return "none"
    shift = constraint_shift(scenario)
    if min_epsilon > shift and scenario.eps_req_value > shift:
        return "shifted"
    return "unshifted"


@dataclass(frozen=True)
class Lagrangian:
    """L(K) of Eq. (12) for one scenario, multiplier λ and constraint form."""

    scenario: Scenario
    lam: float
    form: ConstraintForm

    def from_totals(
        self, total: FloatArray, inv_size_sum: FloatArray, cost: FloatArray
    ) -> FloatArray:
        """L from the aggregates K = ΣK_i, S = ΣK_i/D_i and ΣK_i C_i (any matching shapes)."""
        sc = self.scenario
        eps = error_from_totals(total, inv_size_sum, sc.error_model)
        welfare = sc.n_clients * sc.utility.value(eps) - cost
        if self.lam == 0.0:
            return np.asarray(welfare, dtype=np.float64)
        return np.asarray(
            welfare + self.lam * constraint_term(sc, eps, self.form), dtype=np.float64
        )

    def __call__(self, participants: npt.ArrayLike) -> FloatArray:
        """L(K) for one state (shape (I,)) or a batch (shape (..., I))."""
        k = np.asarray(participants, dtype=np.float64)
        sc = self.scenario
        return self.from_totals(k.sum(axis=-1), k @ (1.0 / sc.sizes), k @ sc.costs)


def vertex_aggregates(scenario: Scenario) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(ΣK_i, ΣK_i/D_i, ΣK_i C_i) on every vertex of X = Π{0, N_i}, in C order of a (2,)*I tensor.

    Built by doubling (O(2^I) memory, never the (2^I, I) state matrix); type 0 is the slowest axis.
    """
    if scenario.n_types > MAX_THETA_TYPES:
        raise ValueError(
            f"types: θ interpolates over 2^I vertices; at most {MAX_THETA_TYPES} types are supported, "
            f"got {scenario.n_types}"
        )
    tot = np.zeros(1)
    inv = np.zeros(1)
    cost = np.zeros(1)
    for n, d, c in zip(
        scenario.counts[::-1], scenario.sizes[::-1], scenario.costs[::-1], strict=True
    ):
        tot = np.concatenate([tot, tot + n])
        inv = np.concatenate([inv, inv + n / d])
        cost = np.concatenate([cost, cost + n * c])
    return tot, inv, cost


def vertex_states(counts: npt.ArrayLike) -> IntArray:
    """The vertices of X = Π{0, N_i}, one per row, in the order of :func:`vertex_aggregates`."""
    n = np.asarray(counts, dtype=np.int64)
    i = n.size
    bits = (np.arange(2**i, dtype=np.int64)[:, None] >> np.arange(i - 1, -1, -1)) & 1
    return np.asarray(bits * n, dtype=np.int64)


def vertex_index(participants: npt.ArrayLike, counts: npt.ArrayLike) -> int | None:
    """Position of K in the vertex order, or None when K is not a vertex of X."""
    k = np.asarray(participants, dtype=np.int64)
    n = np.asarray(counts, dtype=np.int64)
    if not np.all((k == 0) | (k == n)):
        return None
    bits = (k == n) & (n > 0)
    return int(sum(int(b) << (n.size - 1 - j) for j, b in enumerate(bits)))


@dataclass(frozen=True)
class Theta:
    """θ(K) = Σ_{x∈X} L(x) Π_i [(2K_i − N_i)x_i + (N_i − K_i)N_i]/N_i² (Eq. 11): multilinear in K.

    The factor for x_i = N_i is K_i/N_i and for x_i = 0 it is 1 − K_i/N_i, so θ is evaluated by
    contracting the (2,)*I tensor of vertex values one axis at a time (O(2^I) per state).
    """

    vertex_values: FloatArray
    counts: IntArray

    def __call__(self, participants: npt.ArrayLike) -> FloatArray:
        """θ(K) for one state (shape (I,)) or a batch (shape (M, I))."""
        k = np.asarray(participants, dtype=np.float64)
        single = k.ndim == 1
        rows = np.atleast_2d(k)
        if rows.shape[0] > 2:
            varying = np.flatnonzero(np.any(rows != rows[0], axis=0))
            if varying.size <= 1:
                return self._along_axis(rows, int(varying[0]) if varying.size else 0)
        t = rows / self.counts
        n_vertices = self.vertex_values.size
        chunk = max(1, (1 << 22) // n_vertices)
        out = np.empty(t.shape[0], dtype=np.float64)
        for start in range(0, t.shape[0], chunk):
            out[start : start + chunk] = self._contract(t[start : start + chunk])
        return np.asarray(out[0] if single else out, dtype=np.float64)

    def _along_axis(self, rows: FloatArray, axis: int) -> FloatArray:
        """States that differ only in K_axis: θ is linear there, so two contractions suffice."""
        ends = np.tile(rows[0], (2, 1))
        ends[0, axis], ends[1, axis] = 0.0, float(self.counts[axis])
        v0, v1 = self._contract(ends / self.counts)
        frac = rows[:, axis] / float(self.counts[axis])
        return np.asarray(v0 + (v1 - v0) * frac, dtype=np.float64)

    def _contract(self, t: FloatArray) -> FloatArray:
        values = np.broadcast_to(self.vertex_values, (t.shape[0], self.vertex_values.size))
        for axis in range(t.shape[1]):
            half = values.shape[1] // 2
            w = t[:, axis : axis + 1]
            values = (1.0 - w) * values[:, :half] + w * values[:, half:]
        return np.asarray(values[:, 0], dtype=np.float64)

    def slopes(self, participants: npt.ArrayLike) -> FloatArray:
        """∂θ/∂K_i at K for every i: θ is linear along each coordinate, so this is θ(K + e_i) − θ(K)."""
        k = np.asarray(participants, dtype=np.float64)
        i = k.size
        up = np.tile(k, (i, 1))
        lo = up.copy()
        up[np.arange(i), np.arange(i)] = self.counts
        lo[np.arange(i), np.arange(i)] = 0.0
        return np.asarray((self(up) - self(lo)) / self.counts, dtype=np.float64)


@dataclass(frozen=True)
class MultiplierChoice:
    """λ with the interval that supports K* (L(K*) ≥ L(K) over the domain) and why."""

    lam: float
    supports: bool
    lower: float
    upper: float
    reason: str


def supporting_multiplier(
    welfare: FloatArray, constraint: FloatArray, optimum_index: int, has_requirement: bool
) -> MultiplierChoice:
    """λ ≥ 0 with W(K*) + λg(K*) ≥ W(K) + λg(K) for every state of the domain (Lagrangian support of K*).

    Each state bounds λ: from below when g(K) < g(K*) (it scores better on welfare, worse on the
    requirement), from above when g(K) > g(K*). λ is taken strictly inside [lower, upper] when it is
    non-empty (2·lower when upper = ∞), so that K* is the strict maximum wherever possible. With no
    such λ, λ = lower: every state that beats K* on L then has g(K) > g(K*), i.e. a better error.
    """
    w_star = float(welfare[optimum_index])
    g_star = float(constraint[optimum_index])
    dw = welfare - w_star
    dg = constraint - g_star
    tol = 1e-12 * max(1.0, abs(w_star))
    with np.errstate(divide="ignore", invalid="ignore"):
        low_mask = dg < 0
        lower = float(np.max(dw[low_mask] / -dg[low_mask], initial=0.0))
        high_mask = dg > 0
        upper = float(np.min(-dw[high_mask] / dg[high_mask], initial=math.inf))
    tied = (dg == 0) & (dw > tol)
    if not has_requirement:
        if tied.any():
            return MultiplierChoice(0.0, False, 0.0, 0.0, _beaten_reason(int(tied.sum())))
        return MultiplierChoice(
            0.0, True, 0.0, math.inf, "no ε_req: λ = 0 and K* maximises welfare over the domain"
        )
    if tied.any():
        return MultiplierChoice(
            lower,
            False,
            lower,
            upper,
            _beaten_reason(int(tied.sum())) + " at the same constraint value; λ = lower bound used",
        )
    if lower > upper + tol * max(1.0, abs(upper)):
        return MultiplierChoice(
            lower,
            False,
            lower,
            upper,
            f"no λ supports K*: states violating ε_req need λ ≥ {lower:.6g}, states with better error "
            f"and lower welfare need λ ≤ {upper:.6g} (duality gap); λ = {lower:.6g} is used",
        )
    if lower == 0.0:
        lam = 0.0
    elif math.isinf(upper):
        lam = 2.0 * lower
    else:
        lam = 0.5 * (lower + upper)
    return MultiplierChoice(lam, True, lower, upper, f"λ ∈ [{lower:.6g}, {upper:.6g}] supports K*")


def _beaten_reason(n: int) -> str:
    return (
        f"no λ supports K*: {n} state(s) of the domain have higher welfare than K* that λ cannot "
        "penalise (e.g. the empty state, W = 0, when W* ≤ 0 and there is no ε_req)"
    )


def high_regime_domain_size(scenario: Scenario) -> int:
    """How many states :func:`grid_or_candidates` returns at most, without building them.

    Π(N_i + 1) when that is at most MAX_GRID_STATES, else the candidates' bound
    Σ N_i + 2 + 4I² + 2^I (the last term only when I ≤ 16): linear in N, whatever the split.
    """
    grid = state_count(scenario.counts)
    if grid <= MAX_GRID_STATES:
        return grid
    i = scenario.n_types
    return int(scenario.counts.sum()) + 2 + 4 * i * i + (2**i if i <= 16 else 0)


def grid_or_candidates(
    scenario: Scenario, optimum: IntArray
) -> tuple[IntArray, Literal["grid", "candidates"]]:
    """High-regime domain: every state when Π(N_i + 1) ≤ MAX_GRID_STATES, else a candidate set.

    Candidates: the empty state, K*, every state on the I axis lines through K*, K* ± e_i ± e_j, and
    the vertices X when 2^I ≤ 2^16, each once (in no particular order). L0 and λ's support are then
    verified on these states only. O(Σ N_i + I² + 2^min(I, 16)) states, built in linear time.
    """
    counts = scenario.counts
    if state_count(counts) <= MAX_GRID_STATES:
        grids = np.meshgrid(*[np.arange(c + 1, dtype=np.int64) for c in counts], indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=-1), "grid"
    i = scenario.n_types
    eye = np.eye(i, dtype=np.int64)
    steps = np.concatenate([eye, -eye])
    pairs = (steps[:, None, :] + steps[None, :, :]).reshape(-1, i)
    extras = [np.zeros((1, i), dtype=np.int64), optimum[None, :], optimum + pairs]
    if i <= 16:
        extras.append(vertex_states(counts))
    few = np.concatenate(extras)
    few = np.unique(few[np.all((few >= 0) & (few <= counts), axis=1)], axis=0)
    # Every state differing from K* in exactly one coordinate lies on that axis line: the lines
    # below hold it. Building the lines without K* keeps them disjoint, so only the few extra
    # states need de-duplicating (a row sort of all Σ N_i line states took seconds at N = 10^6).
    few = few[np.sum(few != optimum, axis=1) != 1]
    lines = [few]
    for j in range(i):
        values = np.arange(counts[j] + 1, dtype=np.int64)
        line = np.tile(optimum, (int(counts[j]), 1))
        line[:, j] = values[values != optimum[j]]
        lines.append(line)
    return np.concatenate(lines), "candidates"


def domain_error_floor(scenario: Scenario, states: IntArray) -> float:
    """Smallest ε over the non-empty states of a domain (decides the constraint form)."""
    eps = generalization_error(states, scenario.sizes, scenario.error_model)
    return float(np.min(eps))
