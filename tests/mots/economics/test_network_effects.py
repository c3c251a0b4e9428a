"""Property tests: Definition 2, Theorem 1, Corollary 1, Theorem 2 and Example 1 against direct computation of ε."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mots.economics import ErrorModel, generalization_error
from mots.economics.network_effects import (
    Region,
    collaboration_reduces_error,
    eta,
    example1_threshold,
    is_nonnegative_effect,
    network_effect,
    type_effect,
)
from tests.mots.economics.strategies import coalitions, error_models, sizes_st


def _eps(k: list[int] | np.ndarray, sizes: list[float], model: ErrorModel) -> float:
    return float(generalization_error(k, sizes, model))


def test_network_effect_is_error_difference() -> None:
    """Definition 2: the effect is ε_K − ε_{K∪{n}}; here type 3 joining (0, 5) lowers ε."""
    model = ErrorModel(d_gamma2=2000.0)
    effect = network_effect([0, 5], 1, [50.0, 300.0], model)
    assert effect == pytest.approx(_eps([0, 5], [50, 300], model) - _eps([0, 6], [50, 300], model))
    assert effect > 0


def test_network_effect_ignores_offset() -> None:
    """ε0 shifts every ε equally, so network effects do not see it."""
    a = network_effect([2, 3], 0, [50.0, 300.0], ErrorModel(d_gamma2=2000.0, sigma2=0.5))
    b = network_effect([2, 3], 0, [50.0, 300.0], ErrorModel(d_gamma2=2000.0, sigma2=0.5, eps0=0.7))
    assert a == pytest.approx(b, rel=1e-12)


def test_empty_coalition_is_rejected() -> None:
    """Definition 2 needs a non-empty coalition; the error names the rule."""
    with pytest.raises(ValueError, match="non-empty"):
        eta([0, 0], [50.0, 300.0], ErrorModel(d_gamma2=2000.0))


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            coalitions(n), st.lists(sizes_st, min_size=n, max_size=n), sizes_st, error_models()
        )
    )
)
def test_theorem1_sign_of_effect(case: tuple[list[int], list[float], float, ErrorModel]) -> None:
    """Theorem 1: a joiner with D samples has ε_K − ε_{K∪{n}} ≥ 0 iff 1/D ≤ η."""
    k, sizes, joiner, model = case
    h = eta(k, sizes, model)
    assume(abs(1.0 / joiner - h) > 1e-9 * max(1.0, abs(h)))
    direct = network_effect([*k, 0], len(k), [*sizes, joiner], model)
    assert (direct >= 0) == is_nonnegative_effect(k, joiner, sizes, model)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda n: st.tuples(
            coalitions(n, 20),
            coalitions(n, 20),
            st.lists(sizes_st, min_size=n, max_size=n),
            error_models(with_offset=False),
        )
    )
)
def test_corollary1_collaboration(
    case: tuple[list[int], list[int], list[float], ErrorModel],
) -> None:
    """Corollary 1: ε_{a+b} < max{ε_a, ε_b} iff σ²/(dγ²) < (H_bK_b + K_a(2H_b − H_a))/(H_aH_b(K_a+K_b))."""
    ka, kb, sizes, model = case
    inv = 1.0 / np.asarray(sizes)
    h_a, h_b = sum(ka) / float(np.dot(ka, inv)), sum(kb) / float(np.dot(kb, inv))
    e_a, e_b = _eps(ka, sizes, model), _eps(kb, sizes, model)
    e_ab = _eps(np.add(ka, kb), sizes, model)
    gap = max(e_a, e_b) - e_ab
    assume(abs(gap) > 1e-9 * max(e_a, e_b))
    assert (gap > 0) == collaboration_reduces_error(sum(ka), h_a, sum(kb), h_b, model)


def _effects(
    k: list[int], j: int, sizes: list[float], model: ErrorModel, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Effects of adding type-j clients one by one from ε directly, and a float-noise scale."""
    states = np.tile(np.asarray(k, dtype=np.float64), (steps + 1, 1))
    states[:, j] += np.arange(steps + 1)
    eps = generalization_error(states, sizes, model) - model.eps0
    return eps[:-1] - eps[1:], 1e-12 * np.abs(eps[1:])


def _effect_signs(
    k: list[int], j: int, sizes: list[float], model: ErrorModel, steps: int
) -> list[bool]:
    """Signs (≥ 0) of the effects of adding type-j clients one by one."""
    effects, noise = _effects(k, j, sizes, model, steps)
    return [bool(x) for x in effects >= -noise]


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda n: st.tuples(
            coalitions(n, 15),
            st.lists(sizes_st, min_size=n, max_size=n),
            st.integers(0, n - 1),
            error_models(with_offset=False),
        )
    )
)
def test_theorem2_regions(case: tuple[list[int], list[float], int, ErrorModel]) -> None:
    """Theorem 2: each region's sign pattern and the reversal threshold match direct computation."""
    k, sizes, j, model = case
    verdict = type_effect(k, j, sizes, model)
    horizon = 400 if verdict.reversal_at is None else verdict.reversal_at - k[j] + 400
    assume(horizon <= 20_000)
    effects, noise = _effects(k, j, sizes, model, horizon)
    assume(bool(np.all(np.abs(effects) > 1e3 * noise)))  # no sign decided by rounding
    signs = [bool(x) for x in effects >= 0]
    changes = [m for m in range(1, len(signs)) if signs[m] != signs[m - 1]]
    assert len(changes) <= 1
    if verdict.region is Region.II:
        assert all(signs)
    elif verdict.region is Region.III:
        assert not any(signs)
    elif verdict.region is Region.I:
        assert signs[0]
    else:
        assert not signs[0]
    if verdict.reversal_at is not None:
        assert changes == [verdict.reversal_at - k[j]]
        assert verdict.region in (Region.I, Region.IV)
    else:
        assert changes == []


def test_example1_threshold_and_peak() -> None:
    """Example 1 for D = (50, 300), K_2 = 5, σ² = 0: the formula and Eq. 3 both put the peak at K_1 = 3."""
    model = ErrorModel(d_gamma2=2000.0)
    sizes = [50.0, 120.0, 300.0]
    curve = [_eps([k1, 0, 5], sizes, model) for k1 in range(12)]
    assert int(np.argmax(curve)) == 3  # the paper's text says 4; Eq. 3 says 3
    assert example1_threshold(5, 50.0, 300.0) == 3
    assert type_effect([0, 0, 5], 0, sizes, model).reversal_at == 3


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), sizes_st, sizes_st, d_gamma2_st := st.floats(10.0, 1e5))
def test_example1_matches_direct(k2: int, d_a: float, d_b: float, dg: float) -> None:
    """Example 1: with σ² = 0, ε falls with each further type-1 client from the threshold on."""
    d1, d2 = sorted((d_a, d_b))
    assume(d2 > d1 * (1 + 1e-6))
    model = ErrorModel(d_gamma2=dg)
    t = example1_threshold(k2, d1, d2)
    signs = _effect_signs([0, k2], 0, [d1, d2], model, max(t, 0) + 50)
    assume(
        abs(
            float(
                np.diff(
                    generalization_error([[max(t, 0), k2], [max(t, 0) + 1, k2]], [d1, d2], model)
                )[0]
            )
        )
        > 1e-12
    )
    assert all(signs[max(t, 0) :])
    if t >= 1:
        assert not signs[t - 1]
    assert math.isfinite(t)
