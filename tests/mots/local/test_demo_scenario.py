"""``examples/scenarios/platform_demo.yaml`` is the market ``make demo`` runs, and prices as it does."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from mots.local.demo import DEMO_TYPES, DEMO_UTILITY
from mots.scenario_file import load_scenario
from services.orchestration.core.config import CALIBRATED_PRIOR, Settings

SCENARIO = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "platform_demo.yaml"


def test_the_example_is_the_demos_market(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same population, utility and prior as the demo and the orchestration's defaults."""
    monkeypatch.delenv("MOTS_PRIOR_ERROR_MODEL", raising=False)
    sc = load_scenario(SCENARIO)
    assert [t.name for t in sc.types] == [t["name"] for t in DEMO_TYPES]
    assert sc.counts.tolist() == [t["count"] for t in DEMO_TYPES]
    assert sc.sizes.tolist() == [t["data_size"] for t in DEMO_TYPES]
    assert [Decimal(str(t.cost)) for t in sc.types] == [Decimal(t["cost"]) for t in DEMO_TYPES]
    assert sc.utility.model_dump() == DEMO_UTILITY
    em = sc.error_model
    assert {"eps0": em.eps0, "d_gamma2": em.d_gamma2, "sigma2": em.sigma2} == CALIBRATED_PRIOR
    assert Settings().prior_error_model == CALIBRATED_PRIOR


def test_swan_prices_it_as_its_header_says() -> None:
    """K* = (0, 5, 5) with the type-1 clients buying, p = 1.05, ε = 0.673, budget balanced."""
    sc = load_scenario(SCENARIO)
    swan = RobustSwanMechanism(sc)
    k = swan.optimum.participants
    assert k.tolist() == [0, 5, 5]
    assert swan.optimum.buyers.tolist() == [10, 0, 0]
    assert round(float(swan.optimum.epsilon), 3) == 0.673
    assert round(float(swan.optimum.welfare), 2) == 454.33
    quote = swan.quote(k)
    assert round(quote.price, 2) == 1.05
    np.testing.assert_allclose(quote.rewards, [-0.55, 0.15, 1.95], atol=1e-9)
    assert abs(swan.incentive_cost(k, sc.counts - k)) < 1e-9
