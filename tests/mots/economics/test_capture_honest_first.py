"""Rule 3 of mots.economics.capture (issue 24): the quote binds the platform too.

Over random quotes and realised states: an honest type (quoted a payout, nobody of it
over-joined) is paid its quote whenever the round's surplus, the buyers' payments up to the
quoted price and the budget can fund it, and pro rata otherwise; nobody else's terms change; the
subsidy stays within the budget. Over random markets under (robust) SWAN: at K* no unilateral
deviation gains more under rules 1–3 than under rules 1–2, judged by the dynamics' own test of a
profitable move (``dynamics.best_alternative`` on Eq. 6 payoffs from ``best_response``), so rule 3
makes no deviation profitable that was not already.
"""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.economics.best_response import buy_payoff, join_payoff
from mots.economics.capture import capture
from mots.economics.dynamics import Strategy, best_alternative
from mots.economics.error import generalization_error
from mots.economics.mechanisms.base import Mechanism
from mots.economics.mechanisms.swan import SwanMechanism
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from tests.mots.economics.random_markets import random_market

amounts = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
micros = st.integers(-(10**9), 10**9).map(float)


@st.composite
def quoted_rounds(draw: st.DrawFn, values: st.SearchStrategy[float] = amounts) -> dict[str, object]:
    """A quote with its targets K*, a realised state (K, B, declared joiners J ≥ K), a budget."""
    n = draw(st.integers(1, 6))
    vec = hnp.arrays(np.float64, n, elements=values)
    counts = hnp.arrays(np.float64, n, elements=st.integers(0, 60).map(float))
    k = draw(counts)
    return {
        "quoted_price": abs(draw(values)),
        "quoted_rewards": draw(vec),
        "realised_price": draw(values),
        "realised_rewards": draw(vec),
        "participants": k,
        "buyers": draw(counts),
        "budget": abs(draw(values)),
        "quoted_participants": draw(counts),
        "joined": k + draw(hnp.arrays(np.float64, n, elements=st.integers(0, 3).map(float))),
    }


def _rules_1_2(r: dict[str, object], **kw: float) -> object:
    plain = {k: v for k, v in r.items() if k not in ("quoted_participants", "joined")}
    return capture(**plain, **kw)  # type: ignore[arg-type]


def _honest(r: dict[str, object]) -> np.ndarray:
    q = np.asarray(r["quoted_rewards"])
    k = np.asarray(r["participants"])
    return (q > 0) & (k > 0) & (np.asarray(r["joined"]) <= np.asarray(r["quoted_participants"]))


@settings(max_examples=400, deadline=None)
@given(quoted_rounds())
def test_honest_types_are_topped_up_within_the_quote_and_the_budget(r: dict[str, object]) -> None:
    """Rewards and price never fall below rules 1–2's nor rise above the quote; only honest types
    gain; the subsidy at the captured terms is within the budget."""
    old, new = _rules_1_2(r), capture(**r)  # type: ignore[arg-type]
    q = np.asarray(r["quoted_rewards"])
    k, b = np.asarray(r["participants"]), np.asarray(r["buyers"])
    assert np.all(new.rewards >= old.rewards)  # type: ignore[attr-defined]
    assert np.all(np.maximum(new.rewards, 0) <= np.maximum(q, 0) * (1 + 1e-12))
    honest = _honest(r)
    np.testing.assert_array_equal(new.rewards[~honest], old.rewards[~honest])  # type: ignore[attr-defined]
    assert float(old.price) <= float(new.price) <= float(r["quoted_price"]) * (1 + 1e-12)  # type: ignore[attr-defined,arg-type]
    tol = 1e-9 * max(1.0, float((k * np.abs(q)).sum() + b.sum() * float(r["quoted_price"])))  # type: ignore[arg-type]
    assert float(new.subsidy) <= float(r["budget"]) + tol  # type: ignore[arg-type]
    paid_net = float((k * new.rewards).sum() - b.sum() * float(new.price))
    assert float(new.subsidy) == pytest.approx(max(0.0, paid_net), abs=tol)


@settings(max_examples=400, deadline=None)
@given(quoted_rounds())
def test_fundable_quotes_are_paid_in_full(r: dict[str, object]) -> None:
    """When the surplus, the buyers' payments up to the quoted price and the budget's headroom
    cover every honest shortfall, each honest type is paid exactly its quote; else the top-ups
    share one pro-rata factor and use up the available money."""
    old, new = _rules_1_2(r), capture(**r)  # type: ignore[arg-type]
    q = np.asarray(r["quoted_rewards"])
    k, b = np.asarray(r["participants"]), np.asarray(r["buyers"])
    honest = _honest(r)
    short = np.where(honest, q - old.rewards, 0.0)  # type: ignore[attr-defined]
    net = float((k * old.rewards).sum() - b.sum() * float(old.price))  # type: ignore[attr-defined]
    available = max(0.0, -net) + b.sum() * (float(r["quoted_price"]) - float(old.price))  # type: ignore[arg-type,attr-defined]
    available += max(0.0, float(r["budget"]) - max(0.0, net))  # type: ignore[arg-type]
    need = float((k * short).sum())
    scale = 1e-9 * max(1.0, float((k * np.abs(q)).sum()), available)
    if need <= available:
        np.testing.assert_allclose(new.rewards[honest], q[honest], rtol=1e-12, atol=scale)
        assert float(new.top_up_scale) == 1.0
    else:
        f = float(new.top_up_scale)
        assert 0.0 <= f < 1.0
        np.testing.assert_allclose(new.top_up[honest], f * short[honest], rtol=1e-9, atol=scale)
        assert float((k * new.top_up).sum()) == pytest.approx(available, rel=1e-9, abs=scale)


@settings(max_examples=300, deadline=None)
@given(quoted_rounds(values=micros))
def test_in_micro_units_rule_3_is_exact(r: dict[str, object]) -> None:
    """Integer micro-units with quantum 1: every amount an integer, subsidy ≤ budget exactly."""
    c = capture(**r, quantum=1.0)  # type: ignore[arg-type]
    assert np.all(c.rewards == np.round(c.rewards)) and float(c.price) == round(float(c.price))
    k, b = np.asarray(r["participants"]), np.asarray(r["buyers"])
    paid = sum(int(x) * int(y) for x, y in zip(k, c.rewards, strict=True))
    assert max(0, paid - int(b.sum()) * int(c.price)) <= int(r["budget"])  # type: ignore[call-overload]
    assert int(c.price) <= int(r["quoted_price"])  # type: ignore[call-overload]


def test_the_issues_round_pays_the_honest_large_participants_their_quote() -> None:
    """Issue 24: K* = (150 small, 3 large), large quoted 2.450980; the 150 small clients bought
    instead of joining and the 3 large trained. Re-priced at (0, 3) the large reward is 0 (rules
    1–2 paid 0 and the platform kept 82.353); rule 3 pays 2.450980 each from the buyers' money."""
    quote_p, quote_r = 0.549020, [-0.392157, 2.450980]
    realised_r = [0.0, 0.0]
    args = (quote_p, quote_r, quote_p, realised_r, [0, 3], [150, 0], 100.0)
    old = capture(*args)
    assert float(old.rewards[1]) == 0.0
    new = capture(*args, quoted_participants=[150, 3])
    assert float(new.rewards[1]) == pytest.approx(2.450980)
    assert float(new.subsidy) == 0.0 and "topped up to the quote" in new.rule()
    over = capture(*args, quoted_participants=[150, 3], joined=[0, 4])  # a fourth over-joined
    assert float(over.rewards[1]) == 0.0


def _money(
    mech: Mechanism,
    quoted: tuple[float, np.ndarray],
    k_star: np.ndarray,
    k: np.ndarray,
    b: np.ndarray,
    budget: float,
    rule_3: bool,
) -> tuple[np.ndarray, float]:
    """Captured (rewards, price) at realised (K, B) under the quote at K*."""
    prices, rewards = mech.quote_many(k)
    kw = {"quoted_participants": k_star, "joined": k} if rule_3 else {}
    c = capture(quoted[0], quoted[1], prices[0], rewards[0], k, b, budget, **kw)  # type: ignore[arg-type]
    return np.asarray(c.rewards), float(c.price)


def _deviation_gain(
    mech: Mechanism, k_star: np.ndarray, i: int, source: Strategy, budget: float, rule_3: bool
) -> float:
    """The dynamics' gain of the best move of a type-i client playing ``source`` at (K*, N − K*),
    with Eq. (6) payoffs at the captured terms of the state each strategy leads to."""
    sc = mech.scenario
    q = mech.quote(k_star)
    quoted = (q.price, q.rewards)
    base_k, base_b = k_star.copy(), sc.counts - k_star
    if source == Strategy.J:
        base_k[i] -= 1
    elif source == Strategy.B:
        base_b[i] -= 1
    e = np.eye(sc.n_types, dtype=np.int64)[i]
    pay = np.zeros(3)
    for target in (Strategy.J, Strategy.B):
        k = base_k + (e if target == Strategy.J else 0)
        b = base_b + (e if target == Strategy.B else 0)
        if k.sum() == 0:
            pay[target] = -np.inf
            continue
        u = sc.utility.value(generalization_error(k, sc.sizes, sc.error_model))
        rewards, price = _money(mech, quoted, k_star, k, b, budget, rule_3)
        pay[target] = (
            join_payoff(u, sc.costs[i], rewards[i])
            if target == Strategy.J
            else buy_payoff(u, price)
        )
    if source == Strategy.J and k_star.sum() == 1:
        pay[Strategy.A] = pay[Strategy.B] = -np.inf  # the last participant cannot leave
    _, gain = best_alternative(pay[None, :], np.array([int(source)]), mech.noise_floor())
    return float(gain[0])


@pytest.mark.parametrize("mechanism", [RobustSwanMechanism, SwanMechanism])
@pytest.mark.parametrize("regime", ["low", "high"])
def test_rule_3_makes_no_deviation_from_k_star_profitable(
    mechanism: type[Mechanism], regime: str
) -> None:
    """Random markets: every class (type, strategy) present at (K*, N − K*) and every budget
    drawn: the best move's gain under rules 1–3 is at most its gain under rules 1–2 (up to the
    noise floor), so a move the dynamics would take under rule 3 it would already take before."""
    rng = np.random.default_rng(2024 + (regime == "high") + 7 * (mechanism is SwanMechanism))
    checked = new_profitable = 0
    for _ in range(150):
        sc = random_market(rng, regime=regime)  # type: ignore[arg-type]
        mech = mechanism(sc)
        k_star = np.asarray(mech.optimum.participants, dtype=np.int64)  # type: ignore[attr-defined]
        if k_star.sum() == 0:
            continue
        budget = float(rng.choice([0.0, rng.uniform(0, 2), 100.0]))
        for i in range(sc.n_types):
            classes = {Strategy.J: k_star[i], Strategy.B: sc.counts[i] - k_star[i], Strategy.A: 0}
            for source, size in classes.items():
                if size <= 0:
                    continue
                old = _deviation_gain(mech, k_star, i, source, budget, rule_3=False)
                new = _deviation_gain(mech, k_star, i, source, budget, rule_3=True)
                floor = mech.noise_floor() + 1e-9 * (1.0 + abs(old))
                assert new <= old + floor, (sc, i, source, old, new)
                new_profitable += int(new > 0 and old == 0)
                checked += 1
    assert checked > 100 and new_profitable == 0
