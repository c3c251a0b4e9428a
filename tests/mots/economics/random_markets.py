"""Seeded random small markets (both regimes, with and without ε_req) for the mechanism and dynamics tests."""

from __future__ import annotations

from typing import Literal

import numpy as np

from mots.economics import ClientType, ErrorModel, ExponentialUtility, PowerUtility, Scenario
from mots.economics.optimum import min_error


def random_market(
    rng: np.random.Generator,
    regime: Literal["low", "high"] | None = None,
    with_requirement: bool | None = None,
    max_types: int = 3,
    max_count: int = 5,
) -> Scenario:
    """A small market: 1..max_types types, 1..max_count clients each, random Eq. 3 parameters and utility.

    The low regime draws σ² ≤ dγ²/D_I (σ² = 0 half of the time), the high one σ² > dγ²/D_I; ε_req,
    when drawn, lies in [ε_min, 1.5 ε_min] so that it often binds.
    """
    n = int(rng.integers(1, max_types + 1))
    sizes = np.sort(rng.uniform(20.0, 600.0, n)).round(1)
    d_gamma2 = float(rng.uniform(200.0, 5000.0))
    if regime is None:
        regime = "low" if rng.random() < 0.5 else "high"
    if regime == "low":
        sigma2 = 0.0 if rng.random() < 0.5 else float(rng.uniform(0.0, d_gamma2 / sizes.max()))
    else:
        sigma2 = float(rng.uniform(1.01 * d_gamma2 / sizes.max(), 3.0 * d_gamma2 / sizes.min()))
    eps0 = 0.0 if rng.random() < 0.5 else float(rng.uniform(0.0, 1.0))
    per_sample = float(rng.uniform(0.0, 0.02))
    types = [
        ClientType(
            name=f"t{i}",
            count=int(rng.integers(1, max_count + 1)),
            data_size=float(d),
            cost=per_sample * float(d) * float(rng.uniform(0.5, 1.5)),
        )
        for i, d in enumerate(sizes)
    ]
    utility: PowerUtility | ExponentialUtility
    if rng.random() < 0.7:
        utility = PowerUtility(
            scale=float(rng.uniform(5.0, 60.0)), exponent=float(rng.uniform(0.5, 8.0))
        )
    else:
        utility = ExponentialUtility(
            scale=float(rng.uniform(1.0, 50.0)), rate=float(rng.uniform(0.05, 2.0))
        )
    sc = Scenario(
        types=types,
        error_model=ErrorModel(d_gamma2=d_gamma2, sigma2=sigma2, eps0=eps0),
        utility=utility,
    )
    if with_requirement is None:
        with_requirement = bool(rng.random() < 0.5)
    if with_requirement:
        eps_min, _ = min_error(sc)
        sc = sc.with_eps_req(eps_min * float(rng.uniform(1.0, 1.5)))
    return sc


def random_start(rng: np.random.Generator, scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """A random (K, B): K_i uniform in 0..N_i, B_i uniform in 0..N_i − K_i."""
    k = rng.integers(0, scenario.counts + 1)
    b = rng.integers(0, scenario.counts - k + 1)
    return k.astype(np.int64), b.astype(np.int64)
