"""Reference solvers by exhaustive enumeration of all social states (small instances only).

They define what "exact" means for the fast solvers in :mod:`mots.economics.optimum` and are used
by the tests and the solver benchmark as the baseline.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mots.economics.error import generalization_error
from mots.economics.scenario import Scenario
from mots.economics.welfare import welfare_all_served, welfare_fl

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

MAX_ENUMERATED_STATES = 5_000_000
"""Refuse to enumerate more states than this (memory and time guard)."""


def state_count(counts: npt.ArrayLike) -> int:
    """Number of participation vectors K with 0 ≤ K_i ≤ N_i: Π (N_i + 1)."""
    return int(np.prod(np.asarray(counts, dtype=np.int64) + 1, dtype=object))


def all_states(counts: npt.ArrayLike) -> IntArray:
    """Every participation vector K with 0 ≤ K_i ≤ N_i, one per row, the empty state first."""
    n = np.asarray(counts, dtype=np.int64)
    total = state_count(n)
    if total > MAX_ENUMERATED_STATES:
        raise ValueError(
            f"counts: {total} states exceed the enumeration limit {MAX_ENUMERATED_STATES}"
        )
    grids = np.meshgrid(*[np.arange(c + 1, dtype=np.int64) for c in n], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=-1)


def exhaustive_optimum(
    scenario: Scenario, framework: str = "mots"
) -> tuple[IntArray, float, float] | None:
    """Best non-empty state under ε ≤ ε_req by enumeration: (K*, welfare, ε), or None if none is feasible.

    ``framework`` is "mots" (Problem 2: everyone not training buys, Lemma 1) or "fl" (W_FL, Eq. 15).
    Ties are broken towards the lexicographically smallest K.
    """
    states = all_states(scenario.counts)[1:]
    eps = generalization_error(states, scenario.sizes, scenario.error_model)
    if framework == "mots":
        w = welfare_all_served(scenario, states)
    elif framework == "fl":
        w = welfare_fl(scenario, states)
    else:
        raise ValueError(f"framework: must be 'mots' or 'fl', got {framework!r}")
    feasible = eps <= scenario.eps_req_value
    if not feasible.any():
        return None
    w = np.where(feasible, w, -np.inf)
    best = int(np.argmax(w))
    return states[best], float(w[best]), float(eps[best])


def exhaustive_min_error(scenario: Scenario) -> tuple[IntArray, float]:
    """ε_min over non-empty states by enumeration, with a state that attains it."""
    states = all_states(scenario.counts)[1:]
    eps = generalization_error(states, scenario.sizes, scenario.error_model)
    best = int(np.argmin(eps))
    return states[best], float(eps[best])
