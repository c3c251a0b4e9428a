"""The SWAN mechanism as the paper states it (Mechanism 1): θ (low regime) or L (high regime) priced with τ (Eq. 13).

p(K) = U(ε) − τ[θ(K) − L0] and r_i(K) = C_i − U(ε) + τ[θ(K) − L0] when I_H = ∅ (L instead of θ
otherwise). Single-client best responses on this schedule can stall away from K* (issue 2, item 7;
docs/mechanisms.md characterises where they stop); :mod:`.swan_robust` is the platform's default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import numpy.typing as npt

from mots.economics.error import error_from_totals, generalization_error
from mots.economics.lagrangian import (
    ConstraintForm,
    Lagrangian,
    MultiplierChoice,
    Theta,
    choose_constraint_form,
    constraint_term,
    grid_or_candidates,
    regime_split,
    supporting_multiplier,
    vertex_aggregates,
    vertex_index,
)
from mots.economics.mechanisms.base import PotentialMechanism
from mots.economics.optimum import SocialOptimum, regime, solve_mots_optimum
from mots.economics.scenario import Scenario
from mots.economics.welfare import welfare_all_served

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SwanSummary:
    """SWAN's published quantities and its schedule at K* (Mechanism 1, Eqs. 11-13)."""

    regime: Literal["low", "high"]
    low_types: IntArray
    """I_L of Proposition 1 (type indices)."""
    high_types: IntArray
    """I_H of Proposition 1 (type indices)."""
    lam: float
    lambda_supports_optimum: bool
    lambda_reason: str
    constraint_form: ConstraintForm
    optimum_representable: bool
    """False when K* is not a vertex of X in the low regime: θ(K*) ≠ L(K*), so p(K*) and r(K*) are
    not budget-balanced (happens when W* ≤ 0 or the curvature assumption fails)."""
    domain: Literal["vertices", "grid", "candidates"]
    """States over which λ's support and L0 are computed: X (low regime), every state, or candidates."""
    L0: float
    L_optimum: float
    """L(K*)."""
    tau: float
    tau_is_limit: bool
    """True when τ → 0+ (W* ≤ 0, Eq. 13b): tau is 0 and payoffs are compared in units of τ."""
    price: float
    """p(K*)."""
    rewards: FloatArray
    """r_i(K*)."""
    incentive_cost: float
    """Σ_i (K*_i r_i − B*_i p): 0 is budget balance (Theorem 3 when W* > 0)."""
    optimum: SocialOptimum


def incentive_ratio(
    welfare: float, n_clients: int, peak: float, floor: float
) -> tuple[float, bool]:
    """τ of Eq. (13): (W*/N)/(peak − floor) when W* > 0, else the limit τ → 0+ (returned as (0, True))."""
    if welfare > 0.0 and peak > floor:
        return welfare / n_clients / (peak - floor), False
    return 0.0, True


class SwanMechanism(PotentialMechanism):
    """Mechanism 1 with θ over X = Π{0, N_i} (low regime) or L over the reachable states (high regime)."""

    name: ClassVar[str] = "swan"
    description: ClassVar[str] = (
        "SWAN as in the paper (Mechanism 1): θ/L-based price and rewards; best responses can stall"
    )

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        opt = solve_mots_optimum(scenario)
        self.optimum = opt
        self.regime: Literal["low", "high"] = regime(scenario)
        if self.regime == "low":
            self._init_low(opt)
        else:
            self._init_high(opt)
        self.peak = self.L_optimum
        self.tau, self.tau_is_limit = incentive_ratio(
            opt.welfare, scenario.n_clients, self.L_optimum, self.floor
        )
        low, high = regime_split(scenario)
        k = opt.participants
        price, rewards = self.quote_many(k[None, :])
        self.summary = SwanSummary(
            regime=self.regime,
            low_types=low,
            high_types=high,
            lam=self.lagrangian.lam,
            lambda_supports_optimum=self.multiplier.supports,
            lambda_reason=self.multiplier.reason,
            constraint_form=self.lagrangian.form,
            optimum_representable=self.optimum_representable,
            domain=self.domain,
            L0=self.floor,
            L_optimum=self.L_optimum,
            tau=self.tau,
            tau_is_limit=self.tau_is_limit,
            price=float(price[0]),
            rewards=rewards[0],
            incentive_cost=self.incentive_cost(k, opt.buyers),
            optimum=opt,
        )

    def _init_low(self, opt: SocialOptimum) -> None:
        """Low regime: λ, L0 over the vertices X that θ interpolates (K* is a vertex by Proposition 1)."""
        sc = self.scenario
        tot, inv, cost = vertex_aggregates(sc)
        eps = error_from_totals(tot, inv, sc.error_model)
        welfare = sc.n_clients * sc.utility.value(eps) - cost
        form = choose_constraint_form(sc, float(np.min(eps)))
        g = constraint_term(sc, eps, form)
        idx = vertex_index(opt.participants, sc.counts)
        self.optimum_representable = idx is not None
        extra = ""
        if idx is None:
            # K* off X: θ cannot represent it; support is checked with K* appended to the vertices.
            welfare = np.append(welfare, opt.welfare)
            g = np.append(g, constraint_term(sc, np.array([opt.epsilon]), form))
            idx = welfare.size - 1
            extra = "; K* is not a vertex of X, so θ cannot single it out"
        choice = supporting_multiplier(welfare, g, idx, sc.eps_req is not None)
        if extra:
            choice = MultiplierChoice(
                choice.lam, False, choice.lower, choice.upper, choice.reason + extra
            )
        self.multiplier = choice
        self.lagrangian = Lagrangian(sc, choice.lam, form)
        values = self.lagrangian.from_totals(tot, inv, cost)
        self.theta = Theta(values, sc.counts)
        self.domain: Literal["vertices", "grid", "candidates"] = "vertices"
        self.floor = float(np.min(values))
        self.L_optimum = float(self.lagrangian(opt.participants))

    def _init_high(self, opt: SocialOptimum) -> None:
        """High regime: λ, L0 over every state (or a documented candidate set when there are too many)."""
        sc = self.scenario
        states, domain = grid_or_candidates(sc, opt.participants)
        eps = generalization_error(states, sc.sizes, sc.error_model)
        welfare = welfare_all_served(sc, states)
        form = choose_constraint_form(sc, float(np.min(eps)))
        g = constraint_term(sc, eps, form)
        idx = int(np.flatnonzero(np.all(states == opt.participants, axis=1))[0])
        self.optimum_representable = True
        self.multiplier = supporting_multiplier(welfare, g, idx, sc.eps_req is not None)
        self.lagrangian = Lagrangian(sc, self.multiplier.lam, form)
        self.domain = domain
        values = welfare + self.multiplier.lam * g if self.multiplier.lam else welfare
        self.floor = float(np.min(values))
        self.L_optimum = float(values[idx])

    def potential(self, states: npt.ArrayLike) -> FloatArray:
        """θ(K) in the low regime (Eq. 11), L(K) in the high regime (Eq. 12)."""
        if self.regime == "low":
            return self.theta(states)
        return self.lagrangian(states)


def swan_summary(scenario: Scenario) -> SwanSummary:
    """Regime, λ, L0, τ and the schedule at K* of the paper's SWAN for one scenario."""
    return SwanMechanism(scenario).summary


__all__ = ["SwanMechanism", "SwanSummary", "incentive_ratio", "swan_summary"]
