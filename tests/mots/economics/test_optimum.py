"""Tests of the exact optimum solver: equal to enumeration on thousands of instances, fast at scale.

Also checks Proposition 1 (all-or-none) against enumeration and pins the counterexamples found.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mots.economics import (
    ClientType,
    ErrorModel,
    ExponentialUtility,
    PowerUtility,
    Scenario,
    optimum,
)
from mots.economics.error import generalization_error
from mots.economics.exhaustive import all_states, exhaustive_min_error, exhaustive_optimum
from mots.economics.optimum import (
    RequirementInfeasibleError,
    SocialOptimum,
    min_error,
    regime,
    solve_fl_optimum,
    solve_mots_optimum,
)
from mots.economics.welfare import welfare_all_served, welfare_fl
from mots.scenario_file import load_scenario

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
SOLVERS = {"mots": solve_mots_optimum, "fl": solve_fl_optimum}
ENUMERATE_MAX = optimum._ENUMERATE_MAX


@pytest.fixture(autouse=True)
def _structured_search_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solver enumerates tiny markets itself; the tests here exercise its structured search."""
    monkeypatch.setattr(optimum, "_ENUMERATE_MAX", 0)


def _scenario(
    sizes: list[float],
    counts: list[int],
    costs: list[float],
    d_gamma2: float = 2000.0,
    sigma2: float = 0.0,
    eps0: float = 0.0,
    utility: PowerUtility | ExponentialUtility | None = None,
    eps_req: float | None = None,
) -> Scenario:
    return Scenario(
        types=[
            ClientType(name=f"t{i}", count=n, data_size=d, cost=c)
            for i, (d, n, c) in enumerate(zip(sizes, counts, costs, strict=True))
        ],
        error_model=ErrorModel(d_gamma2=d_gamma2, sigma2=sigma2, eps0=eps0),
        utility=utility or PowerUtility(scale=40.0, exponent=16.0),
        eps_req=eps_req,
    )


def _random_scenario(rng: np.random.Generator, max_types: int = 4, max_count: int = 12) -> Scenario:
    """Random small market: both regimes, ε0, both utility families, varied cost structures."""
    n = int(rng.integers(1, max_types + 1))
    sizes = np.sort(rng.uniform(20.0, 400.0, n))
    if rng.random() < 0.15:  # equal sizes (ties in D)
        sizes = np.sort(np.round(sizes / 150.0) * 150.0 + 50.0)
    d_gamma2 = float(rng.uniform(300.0, 5000.0))
    r = rng.random()
    if r < 0.3:
        sigma2 = 0.0
    elif r < 0.6:
        sigma2 = float(rng.uniform(0.0, d_gamma2 / sizes[-1]))
    else:  # high regime
        sigma2 = float(rng.uniform(d_gamma2 / sizes[-1], 3.0 * d_gamma2 / sizes[0]))
    eps0 = 0.0 if rng.random() < 0.5 else float(rng.uniform(0.0, 2.0))
    if rng.random() < 0.7:
        per = float(rng.choice([0.0, 0.0005, 0.002, 0.01, 0.05]))
        costs = sizes * per * rng.uniform(0.5, 1.5, n)
    else:
        costs = rng.uniform(0.0, 5.0, n)
    utility: PowerUtility | ExponentialUtility
    if rng.random() < 0.5:
        utility = PowerUtility(
            scale=float(rng.uniform(1.0, 60.0)), exponent=float(rng.choice([0.5, 1, 2, 4, 8, 16]))
        )
    else:
        utility = ExponentialUtility(
            scale=float(rng.uniform(1.0, 60.0)), rate=float(rng.uniform(0.1, 5.0))
        )
    return _scenario(
        list(sizes),
        [int(v) for v in rng.integers(1, max_count + 1, n)],
        [float(v) for v in costs],
        d_gamma2=d_gamma2,
        sigma2=sigma2,
        eps0=eps0,
        utility=utility,
    )


def _requirements(sc: Scenario, rng: np.random.Generator) -> list[float | None]:
    """No ε_req; just above ε_min; binding between ε_min and the free optimum's ε; a hair below the
    free optimum's ε; at a state's ε."""
    eps_min = exhaustive_min_error(sc)[1]
    free = exhaustive_optimum(sc, "mots")
    free_fl = exhaustive_optimum(sc, "fl")
    assert free is not None and free_fl is not None
    states = all_states(sc.counts)[1:]
    some_state_eps = float(
        generalization_error(states[int(rng.integers(len(states)))], sc.sizes, sc.error_model)
    )
    return [
        None,
        eps_min * (1.0 + 1e-9),
        eps_min + (free[2] - eps_min) * float(rng.uniform(0.0, 1.0)),
        eps_min + (free_fl[2] - eps_min) * float(rng.uniform(0.0, 1.0)),
        free[2] * (1.0 - 1e-9),
        free[2] * (1.0 - 1e-12),  # within the padding of the cut: the free optimum just infeasible
        some_state_eps,
    ]


def _assert_matches_enumeration(sc: Scenario, framework: str) -> SocialOptimum | None:
    """Solver and enumeration agree: same welfare (1e-9 rel.), a feasible state attaining it.

    Feasibility is decided up to rounding (relative 1e-12): where ε_req equals some state's ε,
    the welfare must lie between enumeration's with ε_req·(1 − 1e-12) and with ε_req·(1 + 1e-12).
    """
    solve = SOLVERS[framework]
    req = sc.eps_req_value
    expected = exhaustive_optimum(sc, framework)
    upper = exhaustive_optimum(sc.with_eps_req(req * (1 + 1e-12)), framework)
    lower = exhaustive_optimum(sc.with_eps_req(req * (1 - 1e-12)), framework)
    if upper is None:
        with pytest.raises(RequirementInfeasibleError):
            solve(sc)
        return None
    if expected is None or lower is None:  # ε_req within rounding of ε_min: either answer is right
        try:
            got = solve(sc)
        except RequirementInfeasibleError:
            return None
        assert got.welfare <= upper[1] + 1e-9 * max(1.0, abs(upper[1]))
        return got
    if lower[1] != upper[1]:
        got = solve(sc)
        tol = 1e-9 * max(1.0, abs(upper[1]))
        assert lower[1] - tol <= got.welfare <= upper[1] + tol
        return got
    got = solve(sc)
    _, w_star, _ = expected
    scale = max(1.0, abs(w_star))
    assert got.welfare == pytest.approx(w_star, rel=1e-9, abs=1e-9 * scale), (sc, framework)
    k = got.participants
    assert k.dtype == np.int64 and k.shape == (sc.n_types,)
    assert (k >= 0).all() and (k <= sc.counts).all() and k.sum() > 0
    eps = float(generalization_error(k, sc.sizes, sc.error_model))
    assert got.epsilon == pytest.approx(eps, rel=1e-12)
    assert eps <= sc.eps_req_value * (1.0 + 1e-12)
    welfare = welfare_all_served if framework == "mots" else welfare_fl
    assert float(welfare(sc, k)) == pytest.approx(got.welfare, rel=1e-12, abs=1e-12)
    if framework == "mots":
        assert (got.buyers == sc.counts - k).all()
    else:
        assert (got.buyers == 0).all()
    return got


# ---------------------------------------------------------------------------------------------
# The sanity scenarios
# ---------------------------------------------------------------------------------------------


def test_stall_example_optimum() -> None:
    """examples/scenarios/stall.yaml: K* = (4, 4) with W* ≈ 5.4072 (issue 2, item 7)."""
    sc = load_scenario(EXAMPLES / "stall.yaml")
    opt = solve_mots_optimum(sc)
    assert opt.participants.tolist() == [4, 4]
    assert opt.buyers.tolist() == [0, 0]
    assert opt.welfare == pytest.approx(5.4072, abs=1e-4)


def test_paper_mnist_setting_at_c_over_d_0_002() -> None:
    """The paper's MNIST-like market with C_i/D_i = 0.002: K* = (0,5,5), W* ≈ 63.711, FL W ≈ 29.756."""
    base = load_scenario(EXAMPLES / "paper_mnist.yaml")
    sc = base.model_copy(
        update={"types": [t.model_copy(update={"cost": 0.002 * t.data_size}) for t in base.types]}
    )
    opt, fl = solve_mots_optimum(sc), solve_fl_optimum(sc)
    assert opt.participants.tolist() == [0, 5, 5]
    assert opt.buyers.tolist() == [10, 0, 0]
    assert opt.welfare == pytest.approx(63.711, abs=1e-3)
    assert fl.participants.tolist() == [0, 5, 5]
    assert fl.welfare == pytest.approx(29.756, abs=1e-3)


@pytest.mark.parametrize("name", ["stall.yaml", "paper_mnist.yaml"])
def test_example_files_match_enumeration(name: str) -> None:
    """Every shipped example solves to the enumerated optimum in both frameworks."""
    sc = load_scenario(EXAMPLES / name)
    for framework in SOLVERS:
        _assert_matches_enumeration(sc, framework)


# ---------------------------------------------------------------------------------------------
# Exactness against enumeration
# ---------------------------------------------------------------------------------------------


def test_equals_enumeration_on_thousands_of_seeded_instances() -> None:
    """400 random markets × 7 requirements × 2 frameworks = 5600 solves equal enumeration."""
    rng = np.random.default_rng(20240611)
    for _ in range(400):
        sc = _random_scenario(rng)
        for eps_req in _requirements(sc, rng):
            for framework in SOLVERS:
                _assert_matches_enumeration(sc.with_eps_req(eps_req), framework)


def test_small_markets_take_the_enumeration_path_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the size threshold the solver enumerates; both paths give the same welfare."""
    rng = np.random.default_rng(4)
    for _ in range(100):
        sc = _random_scenario(rng, max_types=3, max_count=8)
        for eps_req in _requirements(sc, rng):
            s = sc.with_eps_req(eps_req)
            for framework in SOLVERS:
                monkeypatch.setattr(optimum, "_ENUMERATE_MAX", ENUMERATE_MAX)
                small = _assert_matches_enumeration(s, framework)
                monkeypatch.setattr(optimum, "_ENUMERATE_MAX", 0)
                structured = _assert_matches_enumeration(s, framework)
                if small is not None and structured is not None:
                    scale = max(1.0, abs(small.welfare))
                    assert small.welfare == pytest.approx(structured.welfare, abs=1e-9 * scale)


def test_equals_enumeration_on_larger_instances_with_binding_requirement() -> None:
    """Up to ~10^5 states per instance, ε_req binding: exercises the branch and bound at the cut."""
    rng = np.random.default_rng(7)
    for it in range(60):
        n_types = 2 + it % 3
        max_count = {2: 300, 3: 45, 4: 16}[n_types]
        sc = _random_scenario(rng, max_types=n_types, max_count=max_count)
        eps_min = exhaustive_min_error(sc)[1]
        for framework in SOLVERS:
            free = exhaustive_optimum(sc, framework)
            assert free is not None
            for frac in (1e-6, float(rng.uniform(0.0, 0.2)), float(rng.uniform(0.2, 1.0))):
                eps_req = eps_min + (free[2] - eps_min) * frac
                _assert_matches_enumeration(sc.with_eps_req(eps_req), framework)


def test_requirement_a_hair_below_the_free_optimum() -> None:
    """Regression: ε_req = ε(free optimum)·(1 − 10^−12) makes the free optimum infeasible by less
    than the cut's rounding pad; the best feasible state is then a non-greedy single participant."""
    sc = _scenario(
        [98.58497304194785, 143.2604673571623, 307.53598943451146],
        [8, 5, 4],
        [0.04448985973126331, 0.1186035266337577, 0.12111693734444602],
        d_gamma2=2753.5527779249633,
        sigma2=57.98454401430848,
        eps0=0.312131656268694,
        utility=ExponentialUtility(scale=16.441748503231754, rate=2.479764574390326),
        eps_req=28.242887155390697,
    )
    for framework in SOLVERS:
        got = _assert_matches_enumeration(sc, framework)
        assert got is not None and got.participants.tolist() == [0, 1, 0]


@st.composite
def markets(draw: st.DrawFn) -> tuple[Scenario, float | None]:
    """A random small market (I ≤ 4, N_i ≤ 10) with an ε_req drawn in one of five ways."""
    n = draw(st.integers(1, 4))
    sizes = sorted(draw(st.lists(st.floats(10.0, 1000.0), min_size=n, max_size=n)))
    counts = draw(st.lists(st.integers(1, 10), min_size=n, max_size=n))
    costs = draw(st.lists(st.floats(0.0, 10.0), min_size=n, max_size=n))
    d_gamma2 = draw(st.floats(50.0, 1e4))
    sigma2 = draw(st.one_of(st.just(0.0), st.floats(0.0, 3.0 * d_gamma2 / sizes[0])))
    eps0 = draw(st.one_of(st.just(0.0), st.floats(0.0, 3.0)))
    utility = draw(
        st.one_of(
            st.builds(PowerUtility, scale=st.floats(0.5, 100.0), exponent=st.floats(0.3, 16.0)),
            st.builds(ExponentialUtility, scale=st.floats(0.5, 100.0), rate=st.floats(0.05, 8.0)),
        )
    )
    sc = _scenario(sizes, counts, costs, d_gamma2, sigma2, eps0, utility)
    eps_min = exhaustive_min_error(sc)[1]
    free = exhaustive_optimum(sc, "mots")
    assert free is not None
    mode = draw(st.sampled_from(["none", "just_above", "binding", "below", "large"]))
    eps_req: float | None = {
        "none": None,
        "just_above": eps_min * (1.0 + 1e-9),
        "binding": eps_min + (free[2] - eps_min) * draw(st.floats(0.0, 1.0)),
        "below": eps_min * 0.999,
        "large": free[2] * 2.0,
    }[mode]
    return sc, eps_req


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markets())
def test_equals_enumeration_property(market: tuple[Scenario, float | None]) -> None:
    """Property: on any small market and any ε_req, the solver's welfare equals enumeration's."""
    sc, eps_req = market
    for framework in SOLVERS:
        _assert_matches_enumeration(sc.with_eps_req(eps_req), framework)


def test_mots_welfare_is_at_least_fl_welfare() -> None:
    """Proposition 3: the MoTS optimum is never below the FL framework's, for any feasible ε_req."""
    rng = np.random.default_rng(3)
    for _ in range(100):
        sc = _random_scenario(rng)
        for eps_req in _requirements(sc, rng):
            s = sc.with_eps_req(eps_req)
            try:
                mots = solve_mots_optimum(s)
            except RequirementInfeasibleError:
                with pytest.raises(RequirementInfeasibleError):
                    solve_fl_optimum(s)
                continue
            assert mots.welfare >= solve_fl_optimum(s).welfare - 1e-9 * max(1.0, abs(mots.welfare))


def test_result_is_deterministic_and_ties_go_to_the_smallest_error() -> None:
    """Two identical types tie in welfare; repeated solves return the same optimal state."""
    sc = _scenario([100.0, 100.0, 300.0], [3, 3, 2], [0.2, 0.2, 0.6])
    first, second = solve_mots_optimum(sc), solve_mots_optimum(sc)
    assert first.participants.tolist() == second.participants.tolist()
    _assert_matches_enumeration(sc, "mots")


# ---------------------------------------------------------------------------------------------
# ε_min and infeasible requirements
# ---------------------------------------------------------------------------------------------


def test_min_error_equals_enumeration() -> None:
    """ε_min and its state equal enumeration's on random markets (both regimes, ties in D)."""
    rng = np.random.default_rng(11)
    for _ in range(500):
        sc = _random_scenario(rng)
        eps, state = min_error(sc)
        _, eps_ex = exhaustive_min_error(sc)
        assert eps == pytest.approx(eps_ex, rel=1e-12)
        assert float(generalization_error(state, sc.sizes, sc.error_model)) == pytest.approx(eps)
        assert state.sum() > 0 and (state <= sc.counts).all() and (state >= 0).all()


def test_min_error_at_scale_equals_a_scan_of_every_total() -> None:
    """With 10^6 clients, ε_min equals a direct scan of every total K (largest D filled first)."""
    rng = np.random.default_rng(5)
    for sigma2_factor in (0.0, 0.5, 2.0, 5.0):
        sizes = np.sort(rng.uniform(20.0, 400.0, 20))
        counts = rng.multinomial(10**6 - 20, np.ones(20) / 20) + 1
        sc = _scenario(
            list(sizes),
            [int(c) for c in counts],
            [0.0] * 20,
            sigma2=sigma2_factor * 2000.0 / sizes[-1],
            eps0=0.3,
        )
        eps, _ = min_error(sc)
        order = np.argsort(-sizes, kind="stable")
        cum_n = np.concatenate([[0], np.cumsum(counts[order])])
        cum_s = np.concatenate([[0.0], np.cumsum(counts[order] / sizes[order])])
        totals = np.arange(1, 10**6 + 1, dtype=np.float64)
        s_min = np.interp(totals, cum_n, cum_s)
        em = sc.error_model
        scan = em.eps0 + em.d_gamma2 * s_min / totals**2 + em.sigma2 * (totals - 1) / totals
        assert eps == pytest.approx(float(scan.min()), rel=1e-12)


def test_requirement_below_eps_min_is_a_clear_error() -> None:
    """ε_req < ε_min raises RequirementInfeasibleError stating ε_min, in both frameworks."""
    sc = _scenario([50.0, 300.0], [3, 2], [0.1, 0.6])
    eps_min, _ = min_error(sc)
    bad = sc.with_eps_req(eps_min * 0.9)
    for solve in SOLVERS.values():
        with pytest.raises(RequirementInfeasibleError, match="eps_min") as info:
            solve(bad)
        assert info.value.eps_min == pytest.approx(eps_min)
        assert info.value.eps_req == pytest.approx(eps_min * 0.9)
        assert f"{eps_min:.6g}" in str(info.value)
    assert solve_mots_optimum(sc.with_eps_req(eps_min)).epsilon == pytest.approx(eps_min)


def test_regime_split() -> None:
    """Proposition 1's regimes: "high" iff σ² > dγ²/D_I."""
    assert regime(_scenario([50.0, 200.0], [1, 1], [0.0, 0.0], sigma2=10.0)) == "low"
    assert regime(_scenario([50.0, 200.0], [1, 1], [0.0, 0.0], sigma2=10.01)) == "high"


# ---------------------------------------------------------------------------------------------
# Speed and self-consistency at scale
# ---------------------------------------------------------------------------------------------


def _large(rng: np.random.Generator, n_types: int, n_clients: int, **kw: Any) -> Scenario:
    sizes = np.sort(rng.uniform(20.0, 400.0, n_types))
    counts = rng.multinomial(n_clients - n_types, np.ones(n_types) / n_types) + 1
    costs = sizes * kw.pop("per_sample", 0.002) * rng.uniform(0.5, 1.5, n_types)
    return _scenario(list(sizes), [int(c) for c in counts], [float(c) for c in costs], **kw)


def _no_single_move_improves(sc: Scenario, opt: SocialOptimum, framework: str) -> None:
    """Necessary condition: no feasible ±1 change of one K_i, nor a one-client swap, does better."""
    welfare = welfare_all_served if framework == "mots" else welfare_fl
    k = opt.participants
    moves = []
    n = sc.n_types
    for i in range(n):
        for d in (-1, 1):
            e = np.zeros(n, dtype=np.int64)
            e[i] = d
            moves.append(e)
        for j in range(n):
            if i != j:
                e = np.zeros(n, dtype=np.int64)
                e[i], e[j] = 1, -1
                moves.append(e)
    cand = k[None, :] + np.array(moves)
    ok = (cand >= 0).all(axis=1) & (cand <= sc.counts).all(axis=1) & (cand.sum(axis=1) > 0)
    cand = cand[ok]
    eps = generalization_error(cand, sc.sizes, sc.error_model)
    w = np.where(eps <= sc.eps_req_value, welfare(sc, cand), -np.inf)
    assert float(w.max()) <= opt.welfare + 1e-12 * max(1.0, abs(opt.welfare))


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"eps0": 0.5},
        {"sigma2": 3.0},
        {"eps0": 1.0, "per_sample": 1e-4, "utility": ExponentialUtility(scale=10.0, rate=1.0)},
    ],
)
def test_million_clients_twenty_types_solve_fast(kw: dict[str, Any]) -> None:
    """10^6 clients in 20 types: both frameworks solve, free and under a binding ε_req, and no
    single-client change improves the returned state (speed: `make bench-solver`)."""
    rng = np.random.default_rng(99)
    sc = _large(rng, 20, 10**6, **kw)
    eps_min, _ = min_error(sc)
    for framework, solve in SOLVERS.items():
        free = solve(sc)
        _no_single_move_improves(sc, free, framework)
        if free.epsilon > eps_min * (1 + 1e-9):
            bound = sc.with_eps_req(eps_min + 0.01 * (free.epsilon - eps_min))
            tight = solve(bound)
            assert tight.epsilon <= bound.eps_req_value * (1 + 1e-12)
            assert tight.welfare <= free.welfare + 1e-9 * abs(free.welfare)
            _no_single_move_improves(bound, tight, framework)


# ---------------------------------------------------------------------------------------------
# Proposition 1 against enumeration
# ---------------------------------------------------------------------------------------------


@st.composite
def paper_markets(draw: st.DrawFn) -> Scenario:
    """Small low-regime markets: σ² = 0 or ≤ dγ²/D_I, ε0 = 0 or positive, no ε_req."""
    n = draw(st.integers(1, 3))
    sizes = sorted(draw(st.lists(st.floats(20.0, 400.0), min_size=n, max_size=n)))
    counts = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    per = draw(st.sampled_from([0.0005, 0.002, 0.01, 0.05]))
    costs = [per * d * draw(st.floats(0.5, 1.5)) for d in sizes]
    d_gamma2 = draw(st.floats(500.0, 4000.0))
    sigma2 = draw(st.one_of(st.just(0.0), st.floats(0.0, d_gamma2 / sizes[-1])))
    eps0 = draw(st.one_of(st.just(0.0), st.floats(0.01, 2.0)))
    utility = draw(
        st.one_of(
            st.builds(
                PowerUtility, scale=st.just(40.0), exponent=st.sampled_from([1.0, 2.0, 4.0, 16.0])
            ),
            st.builds(ExponentialUtility, scale=st.floats(1.0, 60.0), rate=st.floats(0.1, 5.0)),
        )
    )
    return _scenario(sizes, counts, costs, d_gamma2, sigma2, eps0, utility)


def _assumption_holds(sc: Scenario) -> bool:
    """(ε − ε0 − σ²)U''(ε) + 2U'(ε) ≥ 0 at the ε of every non-empty state (the paper's assumption,
    with ε0 added to σ² as in mots.economics.assumptions)."""
    em = sc.error_model
    eps = generalization_error(all_states(sc.counts)[1:], sc.sizes, em)
    return bool(np.all(sc.utility.curvature_condition(eps, em.sigma2 + em.eps0) >= 0))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(paper_markets())
def test_proposition1_all_or_none_in_the_low_regime(sc: Scenario) -> None:
    """Low regime, no ε_req, the curvature assumption at every state, W* > 0: K_i* ∈ {0, N_i}
    (with ε0 = 0 and with ε0 > 0)."""
    if not _assumption_holds(sc):
        return
    found = exhaustive_optimum(sc)
    assert found is not None
    k, w, _ = found
    if w <= 0:
        return
    assert regime(sc) == "low"
    assert all(int(k[i]) in (0, int(sc.counts[i])) for i in range(sc.n_types)), (sc, k)
    assert solve_mots_optimum(sc).welfare == pytest.approx(w, rel=1e-9)


@pytest.mark.parametrize(
    ("case", "sc", "expected"),
    [
        (
            "eps0 > 0 where the shifted curvature assumption fails (low regime, power 40·ε^-2)",
            _scenario(
                [106.39412311801007, 200.9441544958382, 240.6076172829695],
                [5, 5, 3],
                [5.2640240823347355, 13.929518086262878, 9.498761632458253],
                d_gamma2=1642.5975826465394,
                eps0=1.2237894242545824,
                utility=PowerUtility(scale=40.0, exponent=2.0),
            ),
            [0, 2, 3],
        ),
        (
            "binding eps_req (low regime, sigma2 = 0, eps0 = 0, power 40·ε^-1)",
            _scenario(
                [147.11795618672153, 235.29997153335322],
                [2, 1],
                [10.079103889765491, 9.58282709953265],
                d_gamma2=2168.30452041438,
                utility=PowerUtility(scale=40.0, exponent=1.0),
                eps_req=6.757096565518184,
            ),
            [1, 1],
        ),
        (
            "high regime, a type of I_L participates (eps0 = 0, power 40·ε^-1)",
            _scenario(
                [154.86320745746318, 246.77929889017884],
                [3, 1],
                [8.688542596775294, 16.558373193002513],
                d_gamma2=2124.5742358569933,
                sigma2=10.344169351037182,
                utility=PowerUtility(scale=40.0, exponent=1.0),
            ),
            [1, 0],
        ),
        (
            "low regime, sigma2 > 0 where the curvature assumption fails (power 40·ε^-2)",
            _scenario(
                [86.03971311644659, 229.48601269308543],
                [7, 4],
                [0.15985147228619265, 0.4898940381670171],
                d_gamma2=1517.9754138372934,
                sigma2=6.012989943304373,
                utility=PowerUtility(scale=40.0, exponent=2.0),
            ),
            [0, 2],
        ),
    ],
)
def test_proposition1_counterexamples(case: str, sc: Scenario, expected: list[int]) -> None:
    """Outside its assumptions Proposition 1's pattern fails, with W* > 0 (see docs/economics.md)."""
    found = exhaustive_optimum(sc)
    assert found is not None
    k, w, _ = found
    assert w > 0, case
    assert k.tolist() == expected, case
    opt = solve_mots_optimum(sc)
    assert opt.participants.tolist() == expected and opt.welfare == pytest.approx(w), case


def test_non_convex_utility_falls_back_to_enumeration() -> None:
    """A utility not known to be convex is solved by enumeration (small) or refused (large)."""

    class Linear:
        """U(ε) = max(0, 5 − ε): decreasing but not one of the convex families."""

        def value(self, eps: Any) -> Any:
            return np.maximum(0.0, 5.0 - np.asarray(eps, dtype=np.float64))

    small = _scenario([50.0, 300.0], [4, 3], [0.1, 0.3]).model_copy(update={"utility": Linear()})
    expected = exhaustive_optimum(small)
    assert expected is not None
    assert solve_mots_optimum(small).welfare == pytest.approx(expected[1])
    big = _scenario([50.0, 300.0], [10**4, 10**4], [0.1, 0.3]).model_copy(
        update={"utility": Linear()}
    )
    with pytest.raises(ValueError, match="utility"):
        solve_mots_optimum(big)
    assert math.isfinite(solve_fl_optimum(small).welfare)
