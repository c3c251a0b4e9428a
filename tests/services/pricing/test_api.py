"""The pricing API on large populations: N = 200 split 100/50/50 (refused by the old state cap)
is quoted at K* through REST, and neither pricing nor the equilibrium check enumerates states."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from mots.economics import optimum
from mots.platform import quotes as engine
from mots.platform.api.pricing import PricingRequest
from mots.platform.settings import DEV_OPERATOR_TOKEN
from services.pricing.core.config import Settings
from services.pricing.main import create_app
from tests.mots.platform.test_quotes import PAPER

OPERATOR = {"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"}


def _market(counts: tuple[int, ...]) -> dict[str, Any]:
    return {
        **PAPER,
        "types": [{**t, "count": c} for t, c in zip(PAPER["types"], counts, strict=True)],
    }


def _no_enumeration(*_: object) -> None:
    raise AssertionError("a social state enumeration was attempted")


@pytest.mark.parametrize("counts", [(100, 50, 50), (10**6, 5 * 10**5, 5 * 10**5)])
def test_large_populations_are_quoted_without_enumerating_states(
    counts: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /v1/quote answers 200 at K* (optimal); the equilibrium check at the quote's state
    says equilibrium; the state enumerator is never called."""
    monkeypatch.setattr(optimum, "all_states", _no_enumeration)
    data = _market(counts)
    with TestClient(create_app(Settings())) as client:
        r = client.post("/v1/quote", json={"scenario": data}, headers=OPERATOR)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["optimal"] is True and sum(body["participants"]) > 0
    sc = engine.scenario_from(data, max_types=32)
    priced = engine.price(sc, "swan_robust", PricingRequest(scenario=data))
    assert priced.participants == body["participants"]
    check = engine.equilibrium(sc, "swan_robust", body["participants"], body["buyers"])
    assert check == {"equilibrium": True, "reason": "equilibrium"}
