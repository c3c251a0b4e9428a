"""The mechanism registry (default robust SWAN) and the side-by-side comparison behind `mots compare`."""

from __future__ import annotations

import numpy as np
import pytest

from mots.economics.comparison import compare_mechanisms
from mots.economics.mechanisms import (
    DEFAULT_MECHANISM,
    MECHANISMS,
    RobustSwanMechanism,
    get_mechanism,
)
from mots.economics.optimum import solve_fl_optimum, solve_mots_optimum
from mots.scenario_file import load_scenario


def test_names_default_and_descriptions() -> None:
    """Five mechanisms, robust SWAN the default, each with a one-line description."""
    assert set(MECHANISMS) == {"swan_robust", "swan", "modified_fl", "dynamic", "fl_optimum"}
    assert DEFAULT_MECHANISM == "swan_robust"
    for name, cls in MECHANISMS.items():
        assert cls.name == name
        assert cls.description and "\n" not in cls.description


def test_get_mechanism_builds_for_the_scenario_and_names_unknowns() -> None:
    """get_mechanism returns an instance for that scenario; an unknown name lists the known ones."""
    sc = load_scenario("examples/scenarios/stall.yaml")
    mech = get_mechanism(DEFAULT_MECHANISM, sc)
    assert isinstance(mech, RobustSwanMechanism) and mech.scenario is sc
    with pytest.raises(ValueError, match=r"mechanism: unknown name 'nope'.*dynamic, fl_optimum"):
        get_mechanism("nope", sc)


def test_compare_on_the_paper_setting() -> None:
    """Robust SWAN reaches K* with zero incentive cost; the FL optimum stays at W_FL's best state."""
    sc = load_scenario("examples/scenarios/paper_mnist.yaml")
    rows = {r.mechanism: r for r in compare_mechanisms(sc)}
    assert list(rows) == list(MECHANISMS)
    opt = solve_mots_optimum(sc)
    robust = rows["swan_robust"]
    np.testing.assert_array_equal(robust.final_participants, opt.participants)
    assert robust.welfare == pytest.approx(opt.welfare)
    assert robust.incentive_cost == pytest.approx(0.0, abs=1e-9)
    assert robust.converged and robust.meets_requirement
    fl = rows["fl_optimum"]
    np.testing.assert_array_equal(fl.final_participants, solve_fl_optimum(sc).participants)
    assert fl.moves == 0 and fl.welfare < robust.welfare  # Proposition 3
    assert rows["dynamic"].moves >= 0
    keys = {
        "mechanism",
        "final",
        "buyers",
        "welfare",
        "epsilon",
        "meets_requirement",
        "incentive_cost",
        "moves",
        "converged",
        "reason",
    }
    assert set(robust.as_dict()) == keys


def test_compare_from_a_given_start() -> None:
    """A start applies to mechanisms without their own protocol; the paper's SWAN stalls at (1, 0)."""
    sc = load_scenario("examples/scenarios/stall.yaml")
    rows = {r.mechanism: r for r in compare_mechanisms(sc, start=[1, 0])}
    assert rows["swan"].final_participants.tolist() == [1, 0]
    assert rows["swan"].incentive_cost > 0  # off K*, the platform pays
    assert rows["swan_robust"].final_participants.tolist() == [4, 4]
