"""The round machine's subsidy export: the counter sums every settled round's subsidy; the gauges
hold the latest round's subsidy, its budget and the alert share the rule file compares them by."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

from prometheus_client import REGISTRY

from mots.platform.api.rounds import SettleResult
from services.orchestration.rounds import prometheus


def _settled(subsidy: str, budget: str) -> SimpleNamespace:
    zero = Decimal(0)
    result = SettleResult(
        round_id=1,
        payments=zero,
        rewards_paid=Decimal(subsidy),
        charges=zero,
        subsidy=Decimal(subsidy),
        surplus=zero,
        refunds=zero,
        subsidy_budget=Decimal(budget),
    )
    return SimpleNamespace(settlement=result)


def test_subsidy_counter_and_gauges() -> None:
    """Two rounds: the counter grows by both subsidies; the gauges show the second round."""
    before = REGISTRY.get_sample_value("mots_round_subsidy_total") or 0.0
    prometheus.subsidy(_settled("1.5", "100"), 0.8)  # type: ignore[arg-type]
    prometheus.subsidy(_settled("0.25", "2"), 0.5)  # type: ignore[arg-type]
    prometheus.subsidy(SimpleNamespace(settlement=None), 0.5)  # type: ignore[arg-type]
    assert REGISTRY.get_sample_value("mots_round_subsidy_total") == before + 1.75
    assert REGISTRY.get_sample_value("mots_latest_round_subsidy") == 0.25
    assert REGISTRY.get_sample_value("mots_round_subsidy_budget") == 2.0
    assert REGISTRY.get_sample_value("mots_round_subsidy_alert_share") == 0.5
