"""Authorise-then-capture (mots.economics.capture): over random quotes and realised states the
captured terms never exceed the quote for any role, the subsidy never exceeds the budget, nothing
is cut that needed no cut, and at K* with SWAN's terms (Theorem 3) nothing is cut at all."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.economics.capture import bound_by_quote, capture
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from tests.mots.economics.random_markets import random_market

amounts = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
micros = st.integers(-(10**10), 10**10).map(float)


@st.composite
def rounds(draw: st.DrawFn, values: st.SearchStrategy[float] = amounts) -> dict[str, object]:
    """A quote and a realised state of 1..6 types: prices, rewards, K, B and a budget ≥ 0."""
    n = draw(st.integers(1, 6))
    vec = hnp.arrays(np.float64, n, elements=values)
    counts = hnp.arrays(np.float64, n, elements=st.integers(0, 50).map(float))
    return {
        "quoted_price": abs(draw(values)),
        "quoted_rewards": draw(vec),
        "realised_price": draw(values),
        "realised_rewards": draw(vec),
        "participants": draw(counts),
        "buyers": draw(counts),
        "budget": abs(draw(values)),
    }


def _subsidy(c_rewards: np.ndarray, c_price: float, k: np.ndarray, b: np.ndarray) -> float:
    return max(0.0, float((k * c_rewards).sum() - b.sum() * c_price))


@settings(max_examples=300, deadline=None)
@given(rounds())
def test_captured_never_exceeds_the_quote_or_the_budget(r: dict[str, object]) -> None:
    """Payouts ≤ quoted payouts, charges ≤ quoted charges, 0 ≤ price ≤ quoted price, never a
    sign flip; the subsidy at the captured terms equals the reported one and is ≤ budget."""
    c = capture(**r)  # type: ignore[arg-type]
    q = np.asarray(r["quoted_rewards"])
    k, b = np.asarray(r["participants"]), np.asarray(r["buyers"])
    assert np.all(np.maximum(c.rewards, 0) <= np.maximum(q, 0))
    assert np.all(np.maximum(-c.rewards, 0) <= np.maximum(-q, 0))
    assert 0 <= float(c.price) <= float(r["quoted_price"])  # type: ignore[arg-type]
    budget = float(r["budget"])  # type: ignore[arg-type]
    tol = 1e-9 * max(1.0, float((k * np.abs(q)).sum() + b.sum() * float(c.price)))
    assert float(c.subsidy) <= budget + tol
    assert float(c.subsidy) == pytest.approx(_subsidy(c.rewards, float(c.price), k, b), abs=tol)
    assert 0.0 <= float(c.scale) <= 1.0


@settings(max_examples=300, deadline=None)
@given(rounds(values=micros))
def test_in_micro_units_the_bounds_are_exact(r: dict[str, object]) -> None:
    """With integer micro-units and quantum 1 every captured amount is an integer and the
    subsidy is within the budget exactly (what the market books)."""
    c = capture(**r, quantum=1.0)  # type: ignore[arg-type]
    assert np.all(c.rewards == np.round(c.rewards)) and float(c.price) == round(float(c.price))
    k, b = np.asarray(r["participants"]), np.asarray(r["buyers"])
    paid = sum(int(x) * int(y) for x, y in zip(k, c.rewards, strict=True))
    assert max(0, paid - int(b.sum()) * int(c.price)) <= int(r["budget"])  # type: ignore[call-overload]


@settings(max_examples=200, deadline=None)
@given(rounds())
def test_nothing_is_cut_that_needs_no_cut(r: dict[str, object]) -> None:
    """Realised terms inside the quote with a subsidy within the budget are captured as realised."""
    r["realised_rewards"] = bound_by_quote(r["quoted_rewards"], r["realised_rewards"])  # type: ignore[arg-type]
    r["realised_price"] = min(abs(float(r["realised_price"])), float(r["quoted_price"]))  # type: ignore[arg-type]
    k, b = np.asarray(r["participants"]), np.asarray(r["buyers"])
    r["budget"] = budget = _subsidy(np.asarray(r["realised_rewards"]), r["realised_price"], k, b)  # type: ignore[arg-type]
    # The budget is the realised subsidy summed in another order: equal up to float noise.
    c = capture(**r, slack=1e-9 * (1.0 + abs(float(budget))))  # type: ignore[arg-type]
    np.testing.assert_array_equal(c.rewards, r["realised_rewards"])
    assert float(c.price) == r["realised_price"]
    assert not bool(c.bounded) and not bool(c.scaled)
    assert c.rule() == "captured as realised"


def test_an_overcharge_is_bounded_and_an_overspend_is_scaled() -> None:
    """The issue's round: quoted −0.455, re-priced −8.224 → charged 0.455; payouts beyond the
    budget scaled pro rata, charges kept."""
    c = capture(1.0, [-0.455, 2.0], 1.0, [-8.224, 2.0], [3, 4], [0, 0], 1.0)
    np.testing.assert_allclose(c.rewards[0], -0.455)
    income = 3 * 0.455
    np.testing.assert_allclose(4 * c.rewards[1] - income, 1.0)
    assert bool(c.bounded) and bool(c.scaled) and c.scale == pytest.approx((1 + income) / 8)
    assert "bounded by the quote" in c.rule() and "scaled" in c.rule()
    flip = capture(1.0, [0.5, -0.5], 0.4, [-3.0, 2.0], [1, 1], [1, 0], 10.0)
    np.testing.assert_array_equal(flip.rewards, [0.0, 0.0])  # no sign flip either way
    assert float(flip.price) == 0.4


def test_many_states_in_one_call() -> None:
    """One quote against a batch of realised states broadcasts (leading axis)."""
    realised = np.array([[1.0, 1.0], [3.0, -2.0], [0.5, 0.5]])
    c = capture(2.0, [2.0, 1.0], [2.0, 1.0, 3.0], realised, [[1, 1]] * 3, [[0, 1]] * 3, 0.0)
    assert c.rewards.shape == (3, 2) and c.subsidy.shape == (3,)
    assert np.all(c.subsidy <= 1e-12)
    np.testing.assert_allclose(c.price, [2.0, 1.0, 2.0])


@pytest.mark.parametrize("regime", ["low", "high"])
def test_at_k_star_swan_terms_are_captured_whole(regime: str) -> None:
    """Theorem 3: at (K*, N − K*) with robust SWAN's terms and W* > 0, the subsidy is 0 up to
    float noise, so a zero budget cuts nothing; with W* ≤ 0 the cost −W* fits a budget of it."""
    rng = np.random.default_rng(13 + (regime == "high"))
    checked = 0
    for _ in range(300):
        sc = random_market(rng, regime=regime)  # type: ignore[arg-type]
        mech = RobustSwanMechanism(sc)
        k = mech.optimum.participants
        if k.sum() == 0:
            continue
        b = sc.counts - k
        q = mech.quote(k)
        slack = 1e-9 * max(1.0, float(sc.utility.value(mech.optimum.epsilon)) * sc.n_clients)
        budget = 0.0 if mech.optimum.welfare > 0 else -mech.optimum.welfare
        c = capture(q.price, q.rewards, q.price, q.rewards, k, b, budget, slack=slack)
        np.testing.assert_array_equal(c.rewards, q.rewards)
        assert float(c.price) == max(q.price, 0.0) and not bool(c.scaled)
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("regime", ["low", "high"])
def test_swan_quotes_against_random_realised_states(regime: str) -> None:
    """Robust SWAN's quote at K* against its schedule at random realised (K, B): captured within
    the quote for every role and the subsidy within a random budget, in one vectorised call per
    market; where the realised terms lie within the quote and the budget, nothing is cut."""
    rng = np.random.default_rng(29 + (regime == "high"))
    for _ in range(100):
        sc = random_market(rng, regime=regime)  # type: ignore[arg-type]
        mech = RobustSwanMechanism(sc)
        q = mech.quote(mech.optimum.participants)
        k = rng.integers(0, sc.counts + 1, size=(16, sc.n_types))
        b = np.asarray([rng.integers(0, sc.counts - row + 1) for row in k])
        prices, rewards = mech.quote_many(k)
        budget = rng.uniform(0, 5, size=16)
        c = capture(q.price, q.rewards, prices, rewards, k, b, budget)
        assert np.all(np.maximum(c.rewards, 0) <= np.maximum(q.rewards, 0))
        assert np.all(np.maximum(-c.rewards, 0) <= np.maximum(-q.rewards, 0))
        assert np.all((c.price >= 0) & (c.price <= max(q.price, 0)))
        scale = 1e-9 * max(1.0, float(np.abs(q.rewards).sum() * sc.n_clients + abs(q.price)))
        assert np.all(c.subsidy <= budget + scale)
        fine = ~c.bounded & (c.uncapped_subsidy <= budget)
        np.testing.assert_array_equal(c.rewards[fine], rewards[fine])
