"""Optimal social states (Problem 2, Lemma 1, Proposition 1) and the FL framework's best state (Eq. 15).

Exact for any population size. ε (Eq. 3) depends on a state only through K = Σ K_i and
S = Σ K_i/D_i, and both shipped utilities are convex and decreasing, so for a fixed total K the
objective is convex on the slice {Σ x_i = K, 0 ≤ x ≤ N}: its maximum sits at a greedy vertex
("fill types in the order of C_i + μ/D_i", one partially filled type), and only O(I²) orders occur;
searching them takes milliseconds even for 10^9 clients. A binding ε_req adds a knapsack-like cut,
handled exactly by branch and bound with LP bounds (usually milliseconds, its worst case is not
bounded polynomially). The argument and its proofs are in docs/economics.md, section "Solver".
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from mots.economics.error import error_from_totals, generalization_error
from mots.economics.exhaustive import MAX_ENUMERATED_STATES, all_states, state_count
from mots.economics.scenario import Scenario
from mots.economics.utility import ExponentialUtility, PowerUtility
from mots.economics.welfare import welfare_all_served, welfare_fl

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Framework = Literal["mots", "fl"]

FEASIBILITY_RTOL = 1e-13
"""ε ≤ ε_req·(1 + FEASIBILITY_RTOL) counts as feasible: absorbs rounding in ε computed two ways."""

TIE_RTOL = 1e-12
"""Welfare within TIE_RTOL·scale of the best counts as a tie (scale: N·U(ε_min) + Σ N_i C_i)."""

PICK_RTOL = 1e-14
"""States within PICK_RTOL·scale of the best welfare are equals when choosing the returned state."""

_ENUMERATE_MAX = 4096
"""Markets with at most this many states are enumerated: faster than the structured search there."""

_LEAF = 48
"""Intervals of at most this many states along a segment are evaluated point by point."""

_SPLIT = 16
"""An interval that survives its bound is split into this many parts."""


Counts = TypeVar("Counts")
Figure = TypeVar("Figure")


class SocialState(BaseModel, Generic[Counts, Figure]):
    """A social state {K, B} (Problem 2's variables: K_i participants and B_i buyers of each
    type) with its welfare (Eq. 5) and its ε (Eq. 3), in one shape for every form it takes
    (issue 38): the solver's :class:`SocialOptimum` holds K and B as int64 arrays, the pricing
    terms (:class:`mots.platform.api.pricing.PricingResult`) as lists in the scenario's type
    order, a round's summary (:class:`mots.platform.api.rounds.RoundSummary`) per type name,
    with figures that are None where the round never got that far."""

    participants: Counts = Field(..., description="K_i per type")
    buyers: Counts = Field(..., description="B_i per type")
    welfare: Figure = Field(..., description="Eq. 5 at the state")
    epsilon: Figure = Field(..., description="ε at the state (Eq. 3)")


class SocialOptimum(SocialState[InstanceOf[np.ndarray], float]):
    """A social state {K, B} with its welfare and error, as the solver finds it (K and B as
    int64 arrays: :data:`IntArray`)."""

    model_config = ConfigDict(frozen=True)


class RequirementInfeasibleError(ValueError):
    """ε_req is below ε_min: no non-empty coalition trains a model that good."""

    def __init__(self, eps_req: float, eps_min: float) -> None:
        super().__init__(
            f"eps_req: {eps_req:.6g} is below the smallest achievable error eps_min = {eps_min:.6g}; "
            "no coalition can meet it (raise eps_req to at least eps_min)"
        )
        self.eps_req = eps_req
        self.eps_min = eps_min


def regime(scenario: Scenario) -> Literal["low", "high"]:
    """Proposition 1's split: "high" iff I_H = {i : D_i > dγ²/σ²} is non-empty (σ² > dγ²/D_I)."""
    em = scenario.error_model
    return "high" if em.sigma2 * float(scenario.sizes.max()) > em.d_gamma2 else "low"


# --------------------------------------------------------------------------------------------
# The market as flat arrays
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Market:
    """The numbers the solver needs, as arrays, with ε (Eq. 3 + ε0) and welfare from (K, S, C)."""

    scenario: Scenario
    framework: Framework
    counts: IntArray
    inv: FloatArray
    costs: FloatArray
    n_total: int
    eps_req: float

    @classmethod
    def of(cls, scenario: Scenario, framework: Framework) -> _Market:
        return cls(
            scenario=scenario,
            framework=framework,
            counts=scenario.counts,
            inv=1.0 / scenario.sizes,
            costs=scenario.costs,
            n_total=scenario.n_clients,
            eps_req=scenario.eps_req_value,
        )

    def eps(self, k: npt.ArrayLike, s: npt.ArrayLike) -> FloatArray:
        """ε from the totals K and S (Eq. 3 plus ε0)."""
        return error_from_totals(k, s, self.scenario.error_model)

    def factor(self, k: npt.ArrayLike) -> FloatArray:
        """How many clients get the model: N in MoTS (Lemma 1), K in plain FL (Eq. 15)."""
        kk = np.asarray(k, dtype=np.float64)
        if self.framework == "mots":
            return np.full_like(kk, float(self.n_total))
        return kk

    def utility(self, eps: npt.ArrayLike) -> FloatArray:
        return np.asarray(self.scenario.utility.value(np.asarray(eps, dtype=np.float64)))

    def feasible(self, eps: npt.ArrayLike) -> BoolArray:
        return np.asarray(eps, dtype=np.float64) <= self.eps_req * (1.0 + FEASIBILITY_RTOL)

    def welfare(self, k: npt.ArrayLike, s: npt.ArrayLike, c: npt.ArrayLike) -> FloatArray:
        """Objective of Problem 2 (or W_FL) from totals; infeasible states get −∞."""
        eps = self.eps(k, s)
        w = self.factor(k) * self.utility(eps) - np.asarray(c, dtype=np.float64)
        return np.asarray(np.where(self.feasible(eps), w, -np.inf), dtype=np.float64)

    @property
    def eps_cut(self) -> float:
        """ε_req with the feasibility tolerance: the ε that the cut S ≤ S_max(K) stands for."""
        return self.eps_req * (1.0 + FEASIBILITY_RTOL)

    def s_max(self, k: npt.ArrayLike, side: float = 1.0) -> FloatArray:
        """Largest S with ε(K, S) ≤ ε_req at total K (the cut of ε_req, linear in S).

        Moved by side·10^−12 of its largest term: side = +1 gives a cut that no state accepted by
        `feasible` exceeds (for bounds and pruning); side = −1 one that every state below it
        passes `feasible` (for declaring a whole box feasible).
        """
        kk = np.asarray(k, dtype=np.float64)
        em = self.scenario.error_model
        e = self.eps_cut
        smax = ((e - em.eps0 - em.sigma2) * kk * kk + em.sigma2 * kk) / em.d_gamma2
        pad = 1e-12 * (e * kk * kk + em.sigma2 * kk) / em.d_gamma2
        return np.asarray(smax + side * pad, dtype=np.float64)


@dataclass
class _Incumbent:
    """The best welfare found so far and the distinct states within the tie tolerance of it."""

    tol: float
    w: float = -math.inf
    ties: dict[bytes, tuple[float, IntArray]] = field(default_factory=dict)

    def offer(self, w: FloatArray, states: IntArray) -> None:
        """Consider states (rows) with welfare w; keep those within tol of the best."""
        if w.size == 0:
            return
        top = float(np.max(w))
        if not math.isfinite(top) or top < self.w - self.tol:
            return
        if top > self.w:
            self.w = top
            self.ties = {b: t for b, t in self.ties.items() if t[0] >= top - self.tol}
        for i in np.flatnonzero(w >= self.w - self.tol):
            row = np.ascontiguousarray(states[i], dtype=np.int64)
            self.ties.setdefault(row.tobytes(), (float(w[i]), row))

    def beats(self, bound: FloatArray) -> BoolArray:
        """True where an upper bound leaves room for a strictly better state."""
        return np.asarray(bound > self.w + self.tol, dtype=np.bool_)


# --------------------------------------------------------------------------------------------
# Greedy orders and segments
# --------------------------------------------------------------------------------------------


def _breakpoints(m: _Market) -> FloatArray:
    """μ > 0 where two types swap in the order of C_i + μ/D_i: μ_ij = (C_j − C_i)/(1/D_i − 1/D_j)."""
    inv, c = m.inv, m.costs
    di = inv[:, None] - inv[None, :]
    dc = c[None, :] - c[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = dc / di
    mu = mu[(di != 0) & np.isfinite(mu) & (mu > 0)]
    return np.unique(mu)


def _order(m: _Market, mu: float, inv_ascending: bool = True) -> IntArray:
    """Types sorted by C_i + μ/D_i; ties by 1/D_i (ascending or descending), then by index."""
    key = m.costs + mu * m.inv
    idx = np.arange(key.size)
    second = m.inv if inv_ascending else -m.inv
    return np.asarray(np.lexsort((idx, second, key)), dtype=np.int64)


def _orderings(m: _Market) -> IntArray:
    """Every order of C_i + μ/D_i for μ in (0, ∞).

    One μ inside each interval between consecutive breakpoints (geometric midpoints), plus μ just
    below and just above each breakpoint, so that nearly equal breakpoints lose no order to rounding.
    """
    bps = _breakpoints(m)
    if bps.size == 0:
        samples = [1.0]
    else:
        samples = [float(bps[0]) / 2.0, float(bps[-1]) * 2.0]
        samples += [math.sqrt(float(a) * float(b)) for a, b in itertools.pairwise(bps)]
        samples += [float(mu) * f for mu in bps for f in (1.0 - 1e-9, 1.0 + 1e-9)]
    orders = {tuple(int(t) for t in _order(m, mu)) for mu in samples}
    return np.array(sorted(orders), dtype=np.int64).reshape(len(orders), m.counts.size)


@dataclass(frozen=True)
class _Segments:
    """States "types in A full, type f holds x ∈ [lo, hi]": the greedy vertices of every slice."""

    full: BoolArray  # (n_seg, I): membership of A
    f: IntArray
    k_a: FloatArray
    s_a: FloatArray
    c_a: FloatArray
    inv_f: FloatArray
    c_f: FloatArray
    lo: IntArray
    hi: IntArray

    def totals(self, seg: IntArray, x: npt.ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(K, S, C) of the states x on segments seg."""
        xx = np.asarray(x, dtype=np.float64)
        return (
            self.k_a[seg] + xx,
            self.s_a[seg] + xx * self.inv_f[seg],
            self.c_a[seg] + xx * self.c_f[seg],
        )

    def states(self, m: _Market, seg: IntArray, x: IntArray) -> IntArray:
        """Participation vectors K of the states x on segments seg."""
        k = np.where(self.full[seg], m.counts[None, :], 0).astype(np.int64)
        k[np.arange(seg.size), self.f[seg]] = x
        return k


def _segments(m: _Market, orders: IntArray) -> _Segments:
    """The distinct (A, f) pairs of all prefixes of the given orders."""
    n_types = m.counts.size
    seen: dict[tuple[int, int], None] = {}
    for order in orders:
        mask = 0
        for t in order:
            seen.setdefault((mask, int(t)), None)
            mask |= 1 << int(t)
    keys = list(seen)
    full = np.array(
        [[(mask >> i) & 1 == 1 for i in range(n_types)] for mask, _ in keys], dtype=np.bool_
    ).reshape(len(keys), n_types)
    f = np.array([t for _, t in keys], dtype=np.int64)
    nfull = np.where(full, m.counts[None, :], 0).astype(np.float64)
    k_a = nfull.sum(axis=1)
    return _Segments(
        full=full,
        f=f,
        k_a=k_a,
        s_a=nfull @ m.inv,
        c_a=nfull @ m.costs,
        inv_f=m.inv[f],
        c_f=m.costs[f],
        lo=np.where(k_a == 0, 1, 0).astype(np.int64),
        hi=m.counts[f].copy(),
    )


def _eps_lower_bound(
    m: _Market, segs: _Segments, seg: IntArray, x1: FloatArray, x2: FloatArray
) -> FloatArray:
    """A lower bound on ε over x ∈ [x1, x2] on each segment (continuous relaxation).

    Along a segment ε − ε0 − σ² = α/K² + β/K in the total K, with α = dγ²(S_A − K_A/D_f) and
    β = dγ²/D_f − σ²; it has one interior minimum, at K = −2α/β, when α > 0 > β.
    """
    em = m.scenario.error_model
    k1, s1, _ = segs.totals(seg, x1)
    k2, s2, _ = segs.totals(seg, x2)
    inv_f = segs.inv_f[seg]
    alpha = em.d_gamma2 * (segs.s_a[seg] - segs.k_a[seg] * inv_f)
    beta = em.d_gamma2 * inv_f - em.sigma2
    lo = np.minimum(m.eps(k1, s1), m.eps(k2, s2))
    interior = (alpha > 0) & (beta < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        kstar = np.clip(np.where(interior, -2.0 * alpha / beta, k1), k1, k2)
        estar = em.eps0 + em.sigma2 + alpha / (kstar * kstar) + beta / kstar
    lo = np.where(interior, np.minimum(lo, estar), lo)
    return np.asarray(lo - np.abs(lo) * 1e-13, dtype=np.float64)


def _search_segments(m: _Market, segs: _Segments, inc: _Incumbent) -> None:
    """Best feasible state over all segments, by interval branch and bound along each segment."""
    seg = np.flatnonzero(segs.lo <= segs.hi).astype(np.int64)
    x1 = segs.lo[seg].copy()
    x2 = segs.hi[seg].copy()

    def evaluate(s_idx: IntArray, x: IntArray) -> None:
        k, s, c = segs.totals(s_idx, x)
        w = m.welfare(k, s, c)
        if w.size and float(np.max(w)) >= inc.w - inc.tol:
            keep = np.flatnonzero(w >= max(inc.w, float(np.max(w))) - inc.tol)
            inc.offer(w[keep], segs.states(m, s_idx[keep], x[keep]))

    # A first incumbent: both ends and the middle of every segment.
    for pts in (x1, x2, (x1 + x2) // 2):
        evaluate(seg, pts)

    while seg.size:
        eps_lo = _eps_lower_bound(m, segs, seg, x1.astype(np.float64), x2.astype(np.float64))
        k_hi = segs.k_a[seg] + x2
        c_lo = segs.c_a[seg] + x1 * segs.c_f[seg]
        bound = m.factor(k_hi) * m.utility(eps_lo) - c_lo
        bound = np.where(m.feasible(eps_lo), bound, -np.inf)
        keep = inc.beats(bound)
        seg, x1, x2 = seg[keep], x1[keep], x2[keep]
        if not seg.size:
            break
        width = x2 - x1 + 1
        leaf = width <= _LEAF
        if leaf.any():
            lw = width[leaf]
            rep = np.repeat(np.arange(lw.size), lw)
            offs = np.arange(int(lw.sum())) - np.repeat(np.cumsum(lw) - lw, lw)
            evaluate(seg[leaf][rep], x1[leaf][rep] + offs)
        seg, x1, x2, width = seg[~leaf], x1[~leaf], x2[~leaf], width[~leaf]
        if not seg.size:
            break
        parts = np.arange(_SPLIT + 1, dtype=np.int64)
        edges = x1[:, None] + (width[:, None] * parts[None, :]) // _SPLIT
        seg = np.repeat(seg, _SPLIT)
        x1 = edges[:, :-1].ravel()
        x2 = edges[:, 1:].ravel() - 1
        evaluate(seg, x1)
        evaluate(seg, x2)


# --------------------------------------------------------------------------------------------
# The ε_req cut: branch and bound on min-cost states at the cut
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Duals:
    """Multipliers ν ≥ 0 of the cut S ≤ S_max with the greedy order of C_i + ν/D_i for each.

    With ν over {0} ∪ breakpoints, max_ν [min_x (C + νS) − ν·S_max] is the exact LP minimum cost
    at the cut (Lagrangian duality of a linear program; the dual is piecewise linear with kinks
    only at breakpoints).
    """

    nu: FloatArray
    orders: IntArray
    keys: FloatArray  # (n_nu, I): C_i + ν/D_i

    @classmethod
    def of(cls, m: _Market) -> _Duals:
        nu = np.concatenate([[0.0], _breakpoints(m)])
        orders = np.stack([_order(m, float(v)) for v in nu])
        keys = m.costs[None, :] + nu[:, None] * m.inv[None, :]
        return cls(nu=nu, orders=orders, keys=keys)

    def min_key_cost_at(self, caps: FloatArray, r: float) -> FloatArray:
        """m_ν(r) for one r and every ν: (n_nu,)."""
        sorted_caps = caps[self.orders]
        sorted_keys = np.take_along_axis(self.keys, self.orders, axis=1)
        before = np.cumsum(sorted_caps, axis=1) - sorted_caps
        take = np.clip(r - before, 0.0, sorted_caps)
        return np.asarray((take * sorted_keys).sum(axis=1), dtype=np.float64)

    def min_key_cost(self, caps: FloatArray, r: FloatArray) -> FloatArray:
        """m_ν(r) = min Σ x_i(C_i + ν/D_i) over 0 ≤ x ≤ caps, Σ x = r: (n_nu, len(r))."""
        sorted_caps = caps[self.orders]
        sorted_keys = np.take_along_axis(self.keys, self.orders, axis=1)
        cum_n = np.concatenate([np.zeros((self.nu.size, 1)), np.cumsum(sorted_caps, 1)], axis=1)
        cum_c = np.concatenate(
            [np.zeros((self.nu.size, 1)), np.cumsum(sorted_caps * sorted_keys, 1)], axis=1
        )
        return np.stack([np.interp(r, cn, cc) for cn, cc in zip(cum_n, cum_c, strict=True)])


def _min_s(m: _Market, caps: FloatArray, r: FloatArray) -> FloatArray:
    """min S over 0 ≤ x ≤ caps, Σ x = r: fill the largest D first (Section 'Solver', min_error)."""
    order = np.argsort(m.inv, kind="stable")
    cum_n = np.concatenate([[0.0], np.cumsum(caps[order])])
    cum_s = np.concatenate([[0.0], np.cumsum(caps[order] * m.inv[order])])
    return np.asarray(np.interp(r, cum_n, cum_s), dtype=np.float64)


def _cut_bound(
    m: _Market, duals: _Duals, k1: FloatArray, k2: FloatArray, u_req: float
) -> FloatArray:
    """Upper bound on the LP cut value over totals K ∈ [k1, k2] (−∞ where no state is feasible).

    Value at the cut ≤ factor·U(ε_req) − c_LP; c_LP ≥ m_ν(k1) − ν·max S_max (m_ν grows with K).
    """
    em = m.scenario.error_model
    a = (m.eps_cut - em.eps0 - em.sigma2) / em.d_gamma2
    b = em.sigma2 / em.d_gamma2
    smax_hi = np.maximum(m.s_max(k1), m.s_max(k2))
    if a < 0:
        kv = np.clip(-b / (2.0 * a), k1, k2)
        smax_hi = np.maximum(smax_hi, m.s_max(kv))
    caps = m.counts.astype(np.float64)
    lb_cost = np.max(duals.min_key_cost(caps, k1) - duals.nu[:, None] * smax_hi[None, :], axis=0)
    bound = m.factor(k2) * u_req - lb_cost
    infeasible = _min_s(m, caps, k1) > smax_hi
    return np.asarray(np.where(infeasible, -np.inf, bound), dtype=np.float64)


def _candidate_totals(m: _Market, duals: _Duals, inc: _Incumbent, u_req: float) -> IntArray:
    """Totals K whose LP cut value may beat the incumbent, best bound first."""
    n = m.n_total
    n_parts = min(n, 256)
    edges = 1 + (np.arange(n_parts + 1, dtype=np.int64) * n) // n_parts
    k1, k2 = edges[:-1], edges[1:] - 1
    singles_k: list[IntArray] = []
    singles_b: list[FloatArray] = []
    while k1.size:
        bound = _cut_bound(m, duals, k1.astype(np.float64), k2.astype(np.float64), u_req)
        keep = inc.beats(bound)
        k1, k2, bound = k1[keep], k2[keep], bound[keep]
        one = k1 == k2
        singles_k.append(k1[one])
        singles_b.append(bound[one])
        k1, k2 = k1[~one], k2[~one]
        width = k2 - k1 + 1
        parts = np.minimum(width, _SPLIT)
        rep = np.repeat(np.arange(k1.size), parts)
        j = np.arange(int(parts.sum())) - np.repeat(np.cumsum(parts) - parts, parts)
        lo = k1[rep] + (width[rep] * j) // parts[rep]
        hi = k1[rep] + (width[rep] * (j + 1)) // parts[rep] - 1
        k1, k2 = lo, hi
    ks = np.concatenate(singles_k) if singles_k else np.zeros(0, dtype=np.int64)
    bs = np.concatenate(singles_b) if singles_b else np.zeros(0)
    return np.asarray(ks[np.argsort(-bs, kind="stable")], dtype=np.int64)


def _dominance(m: _Market) -> BoolArray:
    """dom[i, j]: type i dominates type j (C_i ≤ C_j and D_i ≥ D_j, ties broken by index).

    Moving a participant from j to i keeps K, does not raise S or the cost, so some optimal state
    fills i completely before using j at all (the exchange argument in docs/economics.md).
    """
    c, inv = m.costs, m.inv
    weak = (c[:, None] <= c[None, :]) & (inv[:, None] <= inv[None, :])
    strict = (c[:, None] < c[None, :]) | (inv[:, None] < inv[None, :])
    idx = np.arange(c.size)
    dom = weak & (strict | (idx[:, None] < idx[None, :]))
    np.fill_diagonal(dom, False)
    return np.asarray(dom, dtype=np.bool_)


def _propagate(
    dom: BoolArray, counts: IntArray, lo: IntArray, hi: IntArray
) -> tuple[IntArray, IntArray] | None:
    """Tighten a box with the dominance rule "x_j > 0 ⇒ x_i = N_i"; None if the box empties."""
    lo, hi = lo.copy(), hi.copy()
    for _ in range(counts.size + 1):
        must_fill = (dom & (lo > 0)[None, :]).any(axis=1) & (lo < counts)
        must_empty = (dom & (hi < counts)[:, None]).any(axis=0) & (hi > 0)
        if not (must_fill.any() or must_empty.any()):
            break
        lo = np.where(must_fill, counts, lo)
        hi = np.where(must_empty, 0, hi)
        if (lo > hi).any():
            return None
    return lo, hi


def _take(caps_sorted: FloatArray, r: float) -> FloatArray:
    """Greedy amounts: r units poured into the (already ordered) capacities, row by row."""
    before = np.cumsum(caps_sorted, axis=-1) - caps_sorted
    return np.asarray(np.clip(r - before, 0.0, caps_sorted), dtype=np.float64)


@dataclass(frozen=True)
class _CutSearch:
    """Branch and bound for one total k under the cut S ≤ S_max(k), with its precomputed orders."""

    m: _Market
    duals: _Duals
    orders: IntArray  # greedy orders (G, I)
    inv_sorted: FloatArray  # 1/D in each order (G, I)
    c_sorted: FloatArray  # C in each order (G, I)
    lp_orders: IntArray  # per ν: the order just below and just above it (n_nu, 2, I)
    by_size: IntArray  # largest D first
    dom: BoolArray
    u_req: float

    @classmethod
    def of(cls, m: _Market, duals: _Duals, orders: IntArray, u_req: float) -> _CutSearch:
        lp = np.stack(
            [
                np.stack([_order(m, float(v), inv_ascending=False), _order(m, float(v))])
                for v in duals.nu
            ]
        )
        return cls(
            m=m,
            duals=duals,
            orders=orders,
            inv_sorted=m.inv[orders],
            c_sorted=m.costs[orders],
            lp_orders=lp,
            by_size=np.argsort(m.inv, kind="stable").astype(np.int64),
            dom=_dominance(m),
            u_req=u_req,
        )

    def solve(self, k: int, inc: _Incumbent) -> None:
        """Exact best state with Σ K_i = k under the cut: best-first branch and bound.

        A node is a box lo ≤ x ≤ hi. Its greedy states (every order) are integral and evaluated;
        its LP relaxation's best point off them lies on the cut, where U = U(ε_req), so the node's
        bound is factor·U(ε_req) − (LP min cost at the cut). Branching splits a fractional
        coordinate of that LP point; the dominance rule tightens every box.
        """
        m = self.m
        fac = float(m.factor(np.array([k]))[0])
        smax = float(m.s_max(np.array([k]))[0])
        smax_sure = float(m.s_max(np.array([k]), side=-1.0)[0])
        use_dom = bool(self.dom.any())
        heap: list[tuple[float, int, IntArray, IntArray, int, int]] = []
        tickets = itertools.count()

        def process(lo: IntArray, hi: IntArray) -> None:
            if use_dom:
                box = _propagate(self.dom, m.counts, lo, hi)
                if box is None:
                    return
                lo, hi = box
            r = float(k - int(lo.sum()))
            caps = (hi - lo).astype(np.float64)
            if r < 0 or r > caps.sum():
                return
            s_f = float(lo @ m.inv)
            c_f = float(lo @ m.costs)
            s_cut = smax - s_f
            big_first = self.by_size
            if float(_take(caps[big_first], r) @ m.inv[big_first]) > s_cut:
                return  # even the smallest S at this node breaks ε_req
            small_first = big_first[::-1]
            fits = float(_take(caps[small_first], r) @ m.inv[small_first]) <= smax_sure - s_f
            # Every greedy state of the node: evaluated, and kept if near the best.
            take = _take(caps[self.orders], r)
            w = m.welfare(
                np.full(take.shape[0], float(k)),
                s_f + (take * self.inv_sorted).sum(axis=1),
                c_f + (take * self.c_sorted).sum(axis=1),
            )
            if float(w.max()) >= inc.w - inc.tol:
                rows = np.flatnonzero(w >= max(inc.w, float(w.max())) - inc.tol)
                xs = np.repeat(lo[None, :], rows.size, axis=0)
                for n_row, g in enumerate(rows):
                    xs[n_row, self.orders[g]] += np.rint(take[g]).astype(np.int64)
                inc.offer(w[rows], xs)
            if fits:
                return  # every state of the box is feasible: its greedy states hold its maximum
            h = self.duals.min_key_cost_at(caps, r) - self.duals.nu * s_cut
            j = int(np.argmax(h))
            bound = fac * self.u_req - c_f - float(h[j])
            if bound <= inc.w + inc.tol:
                return
            # The LP point: a mix of the greedy states just below and just above ν*.
            below, above = self.lp_orders[j]
            x_below = np.zeros(caps.size)
            x_below[below] = _take(caps[below], r)
            x_above = np.zeros(caps.size)
            x_above[above] = _take(caps[above], r)
            s_below, s_above = float(x_below @ m.inv), float(x_above @ m.inv)
            theta = 0.0 if s_below <= s_above else (s_cut - s_above) / (s_below - s_above)
            v = x_above + min(max(theta, 0.0), 1.0) * (x_below - x_above)
            frac = v - np.floor(v)
            score = np.where((frac > 1e-9) & (frac < 1 - 1e-9), np.minimum(frac, 1 - frac), -1.0)
            if score.max() > 0:
                t = int(np.argmax(score))
                split = int(lo[t] + math.floor(v[t]))
            else:
                point = lo + np.rint(v).astype(np.int64)
                inc.offer(
                    m.welfare(
                        np.array([float(k)]), point[None, :] @ m.inv, point[None, :] @ m.costs
                    ),
                    point[None, :],
                )
                if bound <= inc.w + inc.tol:
                    return
                t = int(np.argmax(caps))  # rounding noise only: bisect the widest range
                if caps[t] < 1:
                    return
                split = int(lo[t] + (caps[t] - 1) // 2)
            heapq.heappush(heap, (-bound, next(tickets), lo, hi, t, split))

        process(np.zeros_like(m.counts), m.counts.copy())
        while heap:
            neg_bound, _, lo, hi, t, split = heapq.heappop(heap)
            if -neg_bound <= inc.w + inc.tol:
                break  # best-first: no open node can beat the incumbent any more
            left_hi = hi.copy()
            left_hi[t] = split
            right_lo = lo.copy()
            right_lo[t] = split + 1
            process(lo, left_hi)
            process(right_lo, hi)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _min_error_state(m: _Market) -> tuple[float, IntArray]:
    """ε_min over non-empty states, exactly, in O(I): for each total, fill the largest D first.

    Along the segment where type f is partially filled, ε − ε0 − σ² = α/K² + β/K, so the only
    candidates are the segment's ends and the integers beside K = −2α/β.
    """
    em = m.scenario.error_model
    order = np.argsort(m.inv, kind="stable")  # largest D first (ties: lower index first)
    counts = m.counts[order].astype(np.float64)
    inv = m.inv[order]
    k_a = np.concatenate([[0.0], np.cumsum(counts)[:-1]])
    s_a = np.concatenate([[0.0], np.cumsum(counts * inv)[:-1]])
    alpha = em.d_gamma2 * (s_a - k_a * inv)
    beta = em.d_gamma2 * inv - em.sigma2
    lo = np.where(k_a == 0, 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        kstar = np.where((alpha > 0) & (beta < 0), -2.0 * alpha / beta, k_a + lo)
    xs = np.stack([lo, counts, np.floor(kstar - k_a), np.ceil(kstar - k_a)], axis=1)
    xs = np.clip(xs, lo[:, None], counts[:, None])
    eps = m.eps(k_a[:, None] + xs, s_a[:, None] + xs * inv[:, None])
    seg, col = np.unravel_index(int(np.argmin(eps)), eps.shape)
    state = np.zeros(m.counts.size, dtype=np.int64)
    state[order[:seg]] = m.counts[order[:seg]]
    state[order[seg]] = int(xs[seg, col])
    return float(generalization_error(state, m.scenario.sizes, m.scenario.error_model)), state


def min_error(scenario: Scenario) -> tuple[float, IntArray]:
    """ε_min over non-empty states and a state attaining it (exact, O(I log I))."""
    return _min_error_state(_Market.of(scenario, "mots"))


def _utility_is_convex(scenario: Scenario) -> bool:
    """The solver's structural argument needs U convex and non-increasing in ε (both families are)."""
    u = scenario.utility
    return isinstance(u, PowerUtility | ExponentialUtility) or getattr(u, "convex", False) is True


def _pick(m: _Market, inc: _Incumbent) -> IntArray:
    """Among the states tied with the best (within PICK_RTOL·scale): the smallest ε, then the
    lexicographically smallest K."""
    band = inc.tol * PICK_RTOL / TIE_RTOL
    cands = [s for w, s in inc.ties.values() if w >= inc.w - band]
    states = np.unique(np.stack(cands), axis=0)  # sorted lexicographically
    eps = generalization_error(states, m.scenario.sizes, m.scenario.error_model)
    best = np.flatnonzero(eps <= eps.min() * (1.0 + 1e-15))
    return np.asarray(states[int(best[0])], dtype=np.int64)


def _enumerate(m: _Market, inc: _Incumbent) -> None:
    """Offer every non-empty state (small markets, and utilities the structure does not cover)."""
    states = all_states(m.counts)[1:]
    w = m.welfare(states.sum(axis=1), states @ m.inv, states @ m.costs)
    inc.offer(w, states)


def _solve(scenario: Scenario, framework: Framework) -> SocialOptimum:
    m = _Market.of(scenario, framework)
    eps_min, _ = _min_error_state(m)
    if not m.feasible(eps_min):
        raise RequirementInfeasibleError(m.eps_req, eps_min)
    scale = float(m.factor(m.n_total)) * float(m.utility(eps_min)) + float(m.counts @ m.costs)
    if not math.isfinite(scale):
        raise ValueError(
            f"utility: N·U(eps_min) overflows float64 at eps_min = {eps_min:.6g}; welfare "
            "cannot be compared (use a smaller scale or exponent, or an offset eps0 > 0)"
        )
    inc = _Incumbent(tol=TIE_RTOL * max(1.0, scale))
    n_states = state_count(scenario.counts)
    if not _utility_is_convex(scenario):
        if n_states > MAX_ENUMERATED_STATES:
            raise ValueError(
                f"utility: {type(scenario.utility).__name__} is not known to be convex in ε; the "
                "exact solver then enumerates, which this population is too large for"
            )
        _enumerate(m, inc)
    elif n_states <= _ENUMERATE_MAX:
        _enumerate(m, inc)  # cheaper than the structured search below this size
    else:
        orders = _orderings(m)
        _search_segments(m, _segments(m, orders), inc)
        if math.isfinite(m.eps_req):
            duals = _Duals.of(m)
            u_req = float(m.utility(m.eps_req))
            search = _CutSearch.of(m, duals, orders, u_req)
            for kk in _candidate_totals(m, duals, inc, u_req):
                search.solve(int(kk), inc)
    k = _pick(m, inc)
    if framework == "mots":
        buyers = scenario.counts - k
        w = float(welfare_all_served(scenario, k))
    else:
        buyers = np.zeros_like(k)
        w = float(welfare_fl(scenario, k))
    eps = float(generalization_error(k, scenario.sizes, scenario.error_model))
    return SocialOptimum(participants=k, buyers=buyers, welfare=w, epsilon=eps)


def solve_mots_optimum(scenario: Scenario) -> SocialOptimum:
    """Problem 2: max Σ_i [N_i U(ε) − K_i C_i] s.t. ε(K) ≤ ε_req over non-empty K, with B = N − K."""
    return _solve(scenario, "mots")


def solve_fl_optimum(scenario: Scenario) -> SocialOptimum:
    """The FL framework's best state: max W_FL(K) (Eq. 15) s.t. ε(K) ≤ ε_req, with B = 0."""
    return _solve(scenario, "fl")
