"""The online posterior over Eq. (3)'s parameters: what one coalition identifies moves, the rest
stays; repeated data shrinks the error; no data is the prior; a wrong prior is corrected at K*."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from mots.economics.error import generalization_error
from mots.economics.error_online import ErrorPosterior
from mots.economics.optimum import solve_mots_optimum
from mots.economics.scenario import ErrorModel, Scenario

SIZES = [50.0, 120.0, 300.0]
TYPES = [
    {"name": "type-1", "count": 10, "data_size": 50, "cost": 0.5},
    {"name": "type-2", "count": 5, "data_size": 120, "cost": 1.2},
    {"name": "type-3", "count": 5, "data_size": 300, "cost": 3.0},
]  # Table 1's MNIST column, the platform demo's population
WRONG_PRIOR = ErrorModel(eps0=0.45, d_gamma2=60.0, sigma2=0.05)
"""The platform's old default, made for far longer training (docs/training.md)."""
TRUTH = ErrorModel(eps0=0.65, d_gamma2=39.4, sigma2=0.0)
"""Eq. (3) fitted to the platform's default training (CALIBRATED_PRIOR)."""

models = st.builds(
    ErrorModel,
    eps0=st.floats(0.0, 2.0),
    d_gamma2=st.floats(0.1, 200.0),
    sigma2=st.floats(0.0, 1.0),
)
sds = st.tuples(st.floats(0.01, 1.0), st.floats(0.5, 100.0), st.floats(0.01, 1.0))
coalitions = st.lists(st.integers(0, 10), min_size=3, max_size=3).filter(lambda k: sum(k) > 0)
losses = st.floats(0.05, 3.0)


def _pred(post: ErrorPosterior, k: list[int]) -> float:
    return float(post.predictive([k], SIZES)[0][0])


@settings(max_examples=200, deadline=None)
@given(models, sds, st.floats(0.001, 0.2), coalitions, losses)
def test_the_prediction_at_a_measured_coalition_moves_toward_the_measurement(
    model: ErrorModel, sd: tuple[float, float, float], noise: float, k: list[int], y: float
) -> None:
    """After one measurement the predictive mean at K lies between the prior's and y, by the
    factor xᵀPx/(xᵀPx + r); its uncertainty does not grow."""
    prior = ErrorPosterior.prior(model, sd, noise)
    post = prior.update(k, SIZES, y)
    before, after = _pred(prior, k), _pred(post, k)
    assert abs(after - y) <= abs(before - y) * (1 + 1e-9) + 1e-12
    assert min(before, y) - 1e-9 <= after <= max(before, y) + 1e-9
    var = prior.predictive([k], SIZES)[1][0] ** 2
    assert_allclose(after - y, (before - y) * prior.noise_var / (var + prior.noise_var), atol=1e-9)
    assert post.predictive([k], SIZES)[1][0] <= prior.predictive([k], SIZES)[1][0] + 1e-12
    assert post.points == 1


@settings(max_examples=100, deadline=None)
@given(models, sds, coalitions, losses)
def test_repeated_consistent_measurements_shrink_the_error(
    model: ErrorModel, sd: tuple[float, float, float], k: list[int], y: float
) -> None:
    """The same coalition measured again and again: |prediction − y| never grows and vanishes."""
    post = ErrorPosterior.prior(model, sd, 0.02)
    errors = [abs(_pred(post, k) - y)]
    for _ in range(50):
        post = post.update(k, SIZES, y)
        errors.append(abs(_pred(post, k) - y))
    assert all(b <= a * (1 + 1e-9) + 1e-12 for a, b in itertools.pairwise(errors))
    assert errors[-1] <= max(errors[0] / 10, 1e-9)


@settings(max_examples=100, deadline=None)
@given(models, sds, st.floats(0.001, 0.2))
def test_no_data_is_the_prior(
    model: ErrorModel, sd: tuple[float, float, float], noise: float
) -> None:
    """Without a measurement the point estimate is the configured prior, to the bit."""
    prior = ErrorPosterior.prior(model, sd, noise)
    assert prior.point_estimate() == model and prior.points == 0
    assert_allclose(prior.sd(), sd)


@settings(max_examples=100, deadline=None)
@given(models, sds, st.lists(st.tuples(coalitions, losses), min_size=1, max_size=6))
def test_order_does_not_matter_and_the_estimate_stays_in_eq3s_domain(
    model: ErrorModel, sd: tuple[float, float, float], data: list[tuple[list[int], float]]
) -> None:
    """Bayes' rule is order-free; the point estimate is a valid Eq. (3) model (dγ² > 0)."""
    prior = ErrorPosterior.prior(model, sd, 0.02)
    a = prior.update_all(data, SIZES)
    b = prior.update_all(data[::-1], SIZES)
    assert_allclose(a.mean, b.mean, rtol=1e-6, atol=1e-6 * max(sd))
    est = a.point_estimate()
    assert est.d_gamma2 > 0 and est.sigma2 >= 0 and est.eps0 >= 0


def test_directions_one_coalition_does_not_see_keep_their_prior() -> None:
    """A coalition identifies one combination of θ: a coalition whose terms are uncorrelated with
    it under the prior (xᵀ P0 x' = 0) keeps its prior prediction."""
    prior = ErrorPosterior.prior(TRUTH, [0.1, 10.0, 0.1], 0.02)
    k = [0, 5, 5]
    post = prior.update(k, SIZES, 0.9)
    x = np.array([1.0, (5 / 120 + 5 / 300) / 100, 0.9])
    p0 = prior.cov
    # a direction v with vᵀ P0 x = 0 (orthogonal in the prior's metric): θ·v is unchanged
    v = np.cross(p0 @ x, [0.0, 0.0, 1.0])
    assert abs(v @ p0 @ x) < 1e-9
    assert_allclose(post.mean @ v, prior.mean @ v, atol=1e-9)


def test_a_bad_prior_width_is_refused() -> None:
    with pytest.raises(ValueError, match="sd"):
        ErrorPosterior.prior(TRUTH, [0.1, 0.0, 0.1], 0.02)
    with pytest.raises(ValueError, match="noise_sd"):
        ErrorPosterior.prior(TRUTH, [0.1, 1.0, 0.1], float("nan"))
    with pytest.raises(ValueError, match="drift_sd"):
        ErrorPosterior.prior(TRUTH, [0.1, 1.0, 0.1], 0.02, [0.0, -1.0, 0.0])


DRIFT = (0.01, 1.0, 0.005)
"""The evaluation service's default drift per round (MOTS_ERROR_DRIFT_SD)."""


@settings(max_examples=100, deadline=None)
@given(models, sds, st.lists(st.tuples(coalitions, losses), min_size=1, max_size=6))
def test_zero_drift_is_the_static_posterior(
    model: ErrorModel, sd: tuple[float, float, float], data: list[tuple[list[int], float]]
) -> None:
    """Q = 0 changes nothing: the same mean and covariance as the static update."""
    static = ErrorPosterior.prior(model, sd, 0.02).update_all(data, SIZES)
    drifting = ErrorPosterior.prior(model, sd, 0.02, (0.0, 0.0, 0.0)).update_all(data, SIZES)
    assert_allclose(drifting.mean, static.mean, rtol=1e-12, atol=0)
    assert_allclose(drifting.cov, static.cov, rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None)
@given(
    models,
    st.lists(st.tuples(coalitions, losses), min_size=4, max_size=8),
    coalitions,
    losses,
)
def test_with_drift_a_coalition_the_market_repeats_is_learned_whatever_came_before(
    model: ErrorModel, history: list[tuple[list[int], float]], k: list[int], y: float
) -> None:
    """Thirty rounds of any history (no θ need fit it), then one coalition measured at y over and
    over: with drift the prediction there converges to y; without, the history holds it back
    (the soak's market, which moved to a new K* after 30 rounds)."""
    sd = (0.2, 30.0, 0.05)
    drifting = ErrorPosterior.prior(model, sd, 0.02, DRIFT)
    drifting = drifting.update_all(history * (30 // len(history) + 1), SIZES)
    for _ in range(40):
        drifting = drifting.update(k, SIZES, y)
    assert abs(_pred(drifting, k) - y) <= 1e-3


def test_drift_learns_the_soaks_regime_change_that_the_static_posterior_does_not() -> None:
    """The soak's measurements (noise-free): 30 rounds at K = (0, 0, 5) with 0.708, then
    (0, 5, 5) with 0.667. Twenty rounds after the change the static posterior is still off by
    more than 0.01; the drifting one is within 0.003."""
    history = [([0, 0, 5], 0.708)] * 30
    after = [([0, 5, 5], 0.667)] * 20
    static = ErrorPosterior.prior(WRONG_PRIOR, (0.2, 30.0, 0.05), 0.02)
    drifting = ErrorPosterior.prior(WRONG_PRIOR, (0.2, 30.0, 0.05), 0.02, DRIFT)
    static = static.update_all(history + after, SIZES)
    drifting = drifting.update_all(history + after, SIZES)
    assert abs(_pred(static, [0, 5, 5]) - 0.667) > 0.01
    assert abs(_pred(drifting, [0, 5, 5]) - 0.667) < 0.003


def closed_loop(rounds: int, seed: int) -> list[tuple[list[int], float, float]]:
    """Rounds of a market that prices K* with the posterior's point estimate and measures the
    true ε(K*) with noise (sd 0.01), starting from the wrong prior; (K*, predicted, measured)."""
    rng = np.random.default_rng(seed)
    post = ErrorPosterior.prior(WRONG_PRIOR, [0.2, 30.0, 0.05], 0.02)
    out = []
    for _ in range(rounds):
        model = post.point_estimate()
        scenario = Scenario.model_validate(
            {"types": TYPES, "error_model": model, "utility": {"kind": "power", "exponent": 8.0}}
        )
        k = solve_mots_optimum(scenario).participants
        predicted = float(generalization_error(k, SIZES, model))
        measured = float(generalization_error(k, SIZES, TRUTH)) + rng.normal(0, 0.01)
        out.append(([int(v) for v in k], predicted, measured))
        post = post.update(k, SIZES, measured)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_from_the_wrong_prior_the_error_at_k_star_shrinks_over_rounds(seed: int) -> None:
    """Started from (0.45, 60, 0.05), the mean |predicted − measured| ε at K* over the last third
    of 12 rounds is at most half that of the first third (the issue's soak target)."""
    rounds = closed_loop(12, seed)
    errors = [abs(p - m) for _, p, m in rounds]
    assert errors[0] > 0.1  # the wrong prior is far off at first
    assert np.mean(errors[-4:]) <= np.mean(errors[:4]) / 2
    assert np.mean(errors[-4:]) < 0.03  # at the measurement noise (sd 0.01) level
