"""The participation bond (mots.economics.bond): B_i = max(0, (1 − φ − q)/q)·C_i makes shirking
unprofitable in expectation for every participant who joins (U(ε) + r_i ≥ C_i, Eq. 6b), and
it is the least bond that does so for the marginal joiner (U(ε) + r_i = C_i)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mots.economics.bond import bond_factor, participation_bond, shirk_gain


def test_the_sizes_of_docs_training() -> None:
    """E/4 caught with q = 0.25 needs 2·C_i; E/2 with q = 0.25 needs C_i; q ≥ 1 − φ needs none;
    q = 0 cannot be priced."""
    assert bond_factor(0.25, 0.25) == pytest.approx(2.0)
    assert bond_factor(0.25, 0.5) == pytest.approx(1.0)
    assert bond_factor(0.75, 0.25) == 0.0 and bond_factor(0.9, 0.25) == 0.0
    assert math.isinf(bond_factor(0.0, 0.25))
    assert participation_bond(3.0, 0.5, 0.25) == pytest.approx(1.5)
    assert participation_bond(0.0, 0.0, 0.25) == 0.0


@pytest.mark.parametrize(
    ("q", "phi", "cost"), [(-0.1, 0.25, 1.0), (1.1, 0.25, 1.0), (0.5, 1.5, 1.0), (0.5, 0.2, -1.0)]
)
def test_out_of_range_is_refused_naming_the_argument(q: float, phi: float, cost: float) -> None:
    """A probability outside [0, 1], a work share outside it or a negative cost is a ValueError."""
    with pytest.raises(ValueError, match=r"detection|work_fraction|cost"):
        participation_bond(cost, q, phi)


@given(
    q=st.floats(0.01, 1.0),
    phi=st.floats(0.0, 1.0),
    cost=st.floats(0.0, 100.0),
    surplus=st.floats(0.0, 100.0),
    reward=st.floats(-50.0, 50.0),
)
def test_shirking_never_pays_for_a_joiner(
    q: float, phi: float, cost: float, surplus: float, reward: float
) -> None:
    """Any joiner (U + r − C = ``surplus`` ≥ 0): with the bond, shirking's expected gain ≤ 0."""
    utility = cost - reward + surplus
    bond = participation_bond(cost, q, phi)
    assert shirk_gain(utility, reward, cost, bond, q, phi) <= 1e-9 * (1 + cost + abs(utility))


def test_the_bond_is_the_least_that_deters_the_marginal_joiner() -> None:
    """At U + r = C (a joiner indifferent to abstaining), 1% less bond makes shirking pay."""
    q, phi, cost, reward = 0.3, 0.25, 2.0, 1.0
    utility = cost - reward
    bond = participation_bond(cost, q, phi)
    assert shirk_gain(utility, reward, cost, bond, q, phi) == pytest.approx(0.0, abs=1e-12)
    assert shirk_gain(utility, reward, cost, 0.99 * bond, q, phi) > 0.0
