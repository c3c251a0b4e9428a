"""A round's figures: a finished round's summary carries booked money as six-place strings
(issue 17: one money shape); the subsidy export's counter sums every settled round's subsidy, its
gauges hold the latest round's subsidy, its budget and the alert share the rule file compares
them by."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

from prometheus_client import REGISTRY

from mots.platform.api.base import RoundState
from mots.platform.api.rounds import RoundSummary, SettleResult
from services.orchestration.products import RoundTerms
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.ports import RoundRecord
from services.orchestration.rounds.prometheus import round_summary


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


DEFAULT = {"task": "fashion-mnist"}
"""The labels of a round that names no task (issue 36)."""


def test_subsidy_counter_and_gauges() -> None:
    """Two rounds: the counter grows by both subsidies; the gauges show the second round."""
    before = REGISTRY.get_sample_value("mots_round_subsidy_total", DEFAULT) or 0.0
    prometheus.subsidy(_settled("1.5", "100"), 0.8)  # type: ignore[arg-type]
    prometheus.subsidy(_settled("0.25", "2"), 0.5)  # type: ignore[arg-type]
    prometheus.subsidy(SimpleNamespace(settlement=None), 0.5)  # type: ignore[arg-type]
    assert REGISTRY.get_sample_value("mots_round_subsidy_total", DEFAULT) == before + 1.75
    assert REGISTRY.get_sample_value("mots_latest_round_subsidy", DEFAULT) == 0.25
    assert REGISTRY.get_sample_value("mots_round_subsidy_budget", DEFAULT) == 2.0
    assert REGISTRY.get_sample_value("mots_round_subsidy_alert_share", DEFAULT) == 0.5


def test_each_task_exports_its_own_figures() -> None:
    """Issue 36: a round's figures carry its task's label (the round's ``task``; a round naming
    none is fashion-mnist's), so two tasks' latest rounds stand side by side: a digits round's
    price, reward, subsidy and round count do not overwrite fashion-mnist's, and a new task's
    counters exist at 0 before its first round ends (increase() counts that round)."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rnd = RoundRecord(id=9, state=RoundState.SETTLING, created_at=now, state_entered_at=now)
    digits = SimpleNamespace(task="digits-prom")  # a round record with h36r's task field
    assert prometheus.task_of(rnd) == "fashion-mnist"
    assert prometheus.task_of(digits) == "digits-prom"
    prometheus.state_left(RoundState.OPEN, 0.5, "digits-prom")
    labels = {"task": "digits-prom", "state": "published"}
    assert REGISTRY.get_sample_value("mots_rounds_total", labels) == 0.0  # declared at 0
    settlement = SettleResult(
        round_id=9, payments=Decimal(3), rewards_paid=Decimal(2), charges=Decimal(0),
        subsidy=Decimal("0.5"), surplus=Decimal(1), refunds=Decimal(0), subsidy_budget=Decimal(4),
        captured_price=Decimal("1.5"), captured_rewards={"t": Decimal("2")},
    )  # fmt: skip
    summary = round_summary(rnd, None, None, settlement, True, {}, now)
    prometheus.finished(summary.model_copy(update={"price": Decimal(7)}), "fashion-mnist")
    prometheus.finished(summary, "digits-prom")
    prometheus.subsidy(summary, 0.8, "digits-prom")
    got = REGISTRY.get_sample_value
    assert got("mots_model_price", {"task": "digits-prom"}) == 1.5
    assert got("mots_model_price", DEFAULT) == 7.0
    assert got("mots_reward", {"task": "digits-prom", "type": "t"}) == 2.0
    assert got("mots_rounds_total", labels) == 1.0
    assert got("mots_latest_round_subsidy", {"task": "digits-prom"}) == 0.5
    assert got("mots_round_subsidy_budget", {"task": "digits-prom"}) == 4.0
    assert got("mots_round_duration_seconds_count", {"task": "digits-prom"}) == 1.0
    assert got("mots_model_price") is None  # no series without a task


def test_money_in_the_summary_is_a_six_place_string_and_figures_stay_floats() -> None:
    """Price, rewards and the incentive costs leave as the ledger books them ("-0.900000", not
    -0.9000000000000004); welfare and ε stay floats."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    terms = RoundTerms(
        type_names=["a", "b"],
        participants=[2, 1],
        buyers=[0, 3],
        price=1.0499999999999972,
        rewards=[-0.9000000000000004, 2.25],
        welfare=3.5,
        epsilon=0.61,
        incentive_cost=0.30000000000000004,
    )
    zero = Decimal("0.000000")
    settlement = SettleResult(
        round_id=1,
        payments=Decimal("3.15"),
        rewards_paid=Decimal("2.25"),
        charges=Decimal("1.8"),
        subsidy=zero,
        surplus=Decimal("2.7"),
        refunds=zero,
        captured_price=Decimal("1.05"),
        captured_rewards={"a": Decimal("-0.9"), "b": Decimal("2.25")},
    )
    rnd = RoundRecord(
        id=1,
        state=RoundState.SETTLING,
        created_at=now - timedelta(seconds=10),
        state_entered_at=now - timedelta(seconds=1),
    )
    summary = round_summary(rnd, terms, None, settlement, True, {"open": 1.0}, now)
    wire = json.loads(summary.model_dump_json())
    assert wire["price"] == "1.050000"
    assert wire["rewards"] == {"a": "-0.900000", "b": "2.250000"}
    assert (wire["incentive_cost"], wire["incentive_cost_predicted"]) == ("0.000000", "0.300000")
    assert wire["settlement"]["charges"] == "1.800000"
    assert wire["welfare"] == 3.5 and isinstance(wire["epsilon_predicted"], float)
    assert RoundSummary.model_validate(wire) == summary


def test_a_summary_stored_with_float_money_reads_back_rounded() -> None:
    """Rows written before money was Money (floats in the JSON column) still load."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rnd = RoundRecord(id=2, state=RoundState.SETTLING, created_at=now, state_entered_at=now)
    stored = json.loads(round_summary(rnd, None, None, None, False, {}, now).model_dump_json())
    stored |= {"price": -0.9000000000000004, "rewards": {"a": 1.0499999999999972}}
    stored["incentive_cost"] = 0.1
    back = RoundSummary.model_validate(stored)
    assert (back.price, back.rewards, back.incentive_cost) == (
        Decimal("-0.900000"),
        {"a": Decimal("1.050000")},
        Decimal("0.100000"),
    )


def test_the_summary_and_the_gauges_show_what_the_ledger_booked_not_the_terms() -> None:
    """The capture case (tests/services/market/test_capture.py): re-priced at the realised state
    small is charged 8.224 and large paid 9, but the market books within the quote, −1.25 and 4
    at price 1.5; the summary, ``mots_reward`` and ``mots_model_price`` show the booked amounts."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    terms = RoundTerms(
        type_names=["small", "large"],
        participants=[1, 1],
        buyers=[1, 0],
        price=Decimal("1.8"),
        rewards=[Decimal("-8.224"), Decimal("9")],
        welfare=2.0,
        epsilon=0.6,
        incentive_cost=Decimal("0"),
    )
    settlement = SettleResult(
        round_id=7,
        payments=Decimal("2.5"),
        rewards_paid=Decimal("4"),
        charges=Decimal("1.25"),
        subsidy=Decimal("1.25"),
        surplus=Decimal(0),
        refunds=Decimal(1),
        captured_price=Decimal("1.5"),
        captured_rewards={"small": Decimal("-1.25"), "large": Decimal("4")},
        capture_rule="bounded by the quote",
    )
    rnd = RoundRecord(id=7, state=RoundState.SETTLING, created_at=now, state_entered_at=now)
    summary = round_summary(rnd, terms, None, settlement, True, {}, now)
    assert summary.price == Decimal("1.5")
    assert summary.rewards == {"small": Decimal("-1.25"), "large": Decimal("4")}
    assert summary.incentive_cost == Decimal("1.25")
    # the terms stay readable apart, so a reader sees what the capture rule bounded
    assert summary.terms_price == Decimal("1.8")
    assert summary.terms_rewards == {"small": Decimal("-8.224"), "large": Decimal("9")}
    prometheus.finished(summary)
    assert REGISTRY.get_sample_value("mots_reward", {**DEFAULT, "type": "small"}) == -1.25
    assert REGISTRY.get_sample_value("mots_reward", {**DEFAULT, "type": "large"}) == 4.0
    assert REGISTRY.get_sample_value("mots_model_price", DEFAULT) == 1.5
    assert REGISTRY.get_sample_value("mots_incentive_cost", DEFAULT) == 1.25


def test_a_round_settled_by_rule_shows_no_booked_price_or_reward() -> None:
    """Every buyer refunded: the ledger booked no price and no reward, whatever was quoted."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    terms = RoundTerms.no_model(["small"], [0], [2])
    zero = Decimal(0)
    refunded = SettleResult(
        round_id=8, payments=Decimal(5), rewards_paid=zero, charges=zero, subsidy=zero,
        surplus=zero, refunds=Decimal(5),
    )  # fmt: skip
    rnd = RoundRecord(id=8, state=RoundState.FAILED, created_at=now, state_entered_at=now)
    summary = round_summary(rnd, terms, None, refunded, False, {}, now)
    assert summary.price is None and summary.rewards == {}


def test_finished_rounds_count_participants_by_verification_outcome() -> None:
    """``mots_participant_verifications_total{outcome}``: declared at 0 for each outcome, then
    one per participant of each finished round (MotsFailedVerificationsSpike counts the
    failed_verification ones)."""
    prometheus.declare()

    def count(outcome: str) -> float:
        value = REGISTRY.get_sample_value(
            "mots_participant_verifications_total", {**DEFAULT, "outcome": outcome}
        )
        assert value is not None, outcome  # the series exists before its first event
        return value

    before = {o: count(o) for o in prometheus.PARTICIPANT_OUTCOMES}
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rnd = RoundRecord(id=8, state=RoundState.SETTLING, created_at=now, state_entered_at=now)
    summary = round_summary(rnd, None, None, None, False, {}, now).model_copy(
        update={
            "verification": {
                "1": "verified",
                "2": "failed_verification",
                "3": "dropped",
                "4": "failed_verification",
            }
        }
    )
    prometheus.finished(summary)
    assert {o: count(o) - before[o] for o in before} == {
        "verified": 1.0,
        "dropped": 1.0,
        "failed_verification": 2.0,
    }
