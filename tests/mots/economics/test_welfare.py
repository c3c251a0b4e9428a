"""W_MoTS (Eq. 5), Problem 2's objective and W_FL (Eq. 15)."""

from __future__ import annotations

import numpy as np
import pytest

from mots.economics import (
    ClientType,
    ErrorModel,
    Scenario,
    welfare_all_served,
    welfare_fl,
    welfare_mots,
)
from mots.economics.error import generalization_error


@pytest.fixture
def scenario() -> Scenario:
    return Scenario(
        types=[
            ClientType(name="a", count=4, data_size=150, cost=0.3),
            ClientType(name="b", count=4, data_size=300, cost=0.6),
        ],
        error_model=ErrorModel(d_gamma2=2000.0),
    )


def test_issue_stall_instance_optimum_welfare(scenario: Scenario) -> None:
    """Issue 2's instance: W at K = (4, 4), everyone served, is ≈ 5.41."""
    assert float(welfare_all_served(scenario, [4, 4])) == pytest.approx(5.4072, abs=1e-4)


def test_eq5_by_hand(scenario: Scenario) -> None:
    """W = Σ K_i(U − C_i) + B_i U."""
    u = float(
        scenario.utility.value(generalization_error([1, 2], scenario.sizes, scenario.error_model))
    )
    expected = 1 * (u - 0.3) + 2 * (u - 0.6) + (1 + 2) * u
    assert float(welfare_mots(scenario, [1, 2], [1, 2])) == pytest.approx(expected)


def test_fl_never_exceeds_mots_at_same_state(scenario: Scenario) -> None:
    """Proposition 3's inequality state by state: W_MoTS(K, N − K) ≥ W_FL(K)."""
    states = np.array([[a, b] for a in range(5) for b in range(5)])
    assert np.all(welfare_all_served(scenario, states) >= welfare_fl(scenario, states) - 1e-12)


def test_empty_state_welfare_is_zero(scenario: Scenario) -> None:
    """No model, no cost: welfare 0."""
    assert float(welfare_all_served(scenario, [0, 0])) == 0.0
