"""The sweep axes of Figs. 6-9: per-sample costs C_i/D_i and requirements ε_req, set from a fitted error model.

U = 40·ε^−16 turns small differences in ε into large ones in utility, so the cost at which anything
interesting happens depends on the measured ε levels. The paper's axes belong to its MNIST/CIFAR-10
losses; here the cost axis is expressed in units of c0, the per-sample cost at which the MoTS optimum's
welfare reaches zero, and the ε_req axis spans [ε_min, ε_max] of the fitted model. Where a paper's fixed
value falls outside the fitted model's range it is replaced, and the substitution is recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mots.economics import ClientType, ErrorModel, PowerUtility, Scenario
from mots.economics.error import generalization_error
from mots.economics.exhaustive import all_states
from mots.reproduce.settings import PAPER_COUNTS, PAPER_UTILITY


def build_scenario(
    sizes: tuple[float, ...] | list[float],
    error_model: ErrorModel,
    per_sample_cost: float,
    eps_req: float | None = None,
    counts: tuple[int, ...] = PAPER_COUNTS,
) -> Scenario:
    """The paper's market (N = 10/5/5, U = 40·ε^−16) with C_i = c·D_i (cost proportional to data size)."""
    if per_sample_cost < 0 or not math.isfinite(per_sample_cost):
        raise ValueError(f"per_sample_cost: must be a finite number ≥ 0, got {per_sample_cost!r}")
    if len(sizes) != len(counts):
        raise ValueError(f"sizes: need one data size per type ({len(counts)}), got {len(sizes)}")
    types = [
        ClientType(
            name=f"type-{i + 1}", count=n, data_size=float(d), cost=per_sample_cost * float(d)
        )
        for i, (n, d) in enumerate(zip(counts, sizes, strict=True))
    ]
    return Scenario(
        types=types,
        error_model=error_model,
        utility=PowerUtility(scale=PAPER_UTILITY[0], exponent=PAPER_UTILITY[1]),
        eps_req=eps_req,
    )


def error_range(scenario: Scenario) -> tuple[float, float]:
    """(ε_min, ε_max) over the non-empty social states of ``scenario``."""
    states = all_states(scenario.counts)[1:]
    eps = generalization_error(states, scenario.sizes, scenario.error_model)
    return float(eps.min()), float(eps.max())


def zero_welfare_cost(scenario: Scenario) -> float:
    """c0 = max over non-empty K of N·U(ε(K)) / Σ K_i D_i: above it every state has W_MoTS < 0 (C_i = c·D_i)."""
    states = all_states(scenario.counts)[1:]
    eps = generalization_error(states, scenario.sizes, scenario.error_model)
    value = scenario.n_clients * scenario.utility.value(eps)
    return float(np.max(value / (states @ scenario.sizes)))


def cost_axis(c0: float, points: int, top: float = 1.5) -> list[float]:
    """Per-sample costs from 5 % of c0 to ``top``·c0 (past the point where MoTS welfare turns negative)."""
    if points < 2:
        raise ValueError(f"points: a sweep needs at least 2 points, got {points}")
    if not c0 > 0 or not math.isfinite(c0):
        raise ValueError(f"c0: must be a finite number > 0, got {c0!r}")
    return [float(v) for v in c0 * np.linspace(0.05, top, points)]


def requirement_axis(eps_min: float, eps_max: float, points: int) -> list[float]:
    """ε_req from ε_min (the tightest feasible requirement) to ε_max (no longer binding on any state)."""
    if points < 2:
        raise ValueError(f"points: a sweep needs at least 2 points, got {points}")
    if not eps_max >= eps_min:
        raise ValueError(f"eps_max: must be ≥ eps_min ({eps_min}), got {eps_max}")
    grid = eps_min + (eps_max - eps_min) * np.linspace(0.0, 1.0, points) ** 2
    grid[0] = eps_min * (1.0 + 1e-9)  # rounding must not make ε_min itself infeasible
    return [float(v) for v in grid]


@dataclass(frozen=True)
class FixedValue:
    """A value the paper holds fixed in a panel, and the one used here."""

    name: str
    paper: float
    used: float
    reason: str

    def to_dict(self) -> dict[str, float | str]:
        """JSON-ready form."""
        return {"name": self.name, "paper": self.paper, "used": self.used, "reason": self.reason}


REQ_FALLBACK_FRACTION = 0.1
"""Where the paper's ε_req lies outside [ε_min, ε_max], use ε_min + 10 % of the range (binding, feasible)."""


def fixed_requirement(name: str, paper: float, eps_min: float, eps_max: float) -> FixedValue:
    """The paper's fixed ε_req if the fitted model can meet it and it binds some state, else a substitute."""
    if eps_min <= paper < eps_max:
        return FixedValue(name, paper, paper, "the paper's value (inside the fitted ε range)")
    used = eps_min + REQ_FALLBACK_FRACTION * (eps_max - eps_min)
    where = "below ε_min" if paper < eps_min else "above every state's ε (never binding)"
    return FixedValue(
        name,
        paper,
        used,
        f"the paper's value is {where} of the fitted model [{eps_min:.4g}, {eps_max:.4g}]; "
        f"used ε_min + {REQ_FALLBACK_FRACTION:.0%} of that range",
    )


def fixed_cost(name: str, paper: float, c0: float, fraction: float) -> FixedValue:
    """A fixed per-sample cost: ``fraction``·c0, since the paper's value belongs to its own ε scale."""
    return FixedValue(
        name,
        paper,
        fraction * c0,
        f"{fraction:g}·c0 with c0 = {c0:.4g} (the paper's C_i/D_i = {paper:g} is on its own utility scale)",
    )
