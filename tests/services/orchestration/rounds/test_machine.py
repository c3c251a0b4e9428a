"""The round machine's rules, driven through in-memory fakes of its ports (milliseconds each)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from prometheus_client import REGISTRY

from mots.platform.api.base import RoundState
from mots.platform.api.rounds import ErrorFit
from mots.platform.contracts import ErrorPosteriorEstimate
from services.orchestration.rounds.machine import RETRY_SETTLEMENT_S, Step
from services.orchestration.rounds.ports import RoundInFlight
from services.orchestration.trainer import registered_keys
from tests.services.orchestration.rounds.fakes import LARGE, SMALL, Failing, Rig, rig

S = RoundState
PUBLISHED_PATH = ["collecting", "training", "evaluating", "settling", "published"]
SUMMARY_KEYS = {
    "round_id", "state", "rule", "mechanism", "participants", "buyers", "price", "rewards", "terms_price", "terms_rewards",
    "welfare", "incentive_cost", "incentive_cost_predicted", "epsilon", "epsilon_predicted",
    "epsilon_training", "equilibrium", "round_seconds", "phase_seconds", "waiting_seconds", "platform_seconds",
    "platform_share", "training_round_seconds", "dropped", "failed_verification",
    "verification", "settlement", "error_model_fit",
}  # fmt: skip
"""The keys of a round's summary (the demo's summary.json, the benchmark and the dashboards)."""


def _count(state: str) -> float:
    return (
        REGISTRY.get_sample_value("mots_rounds_total", {"task": "fashion-mnist", "state": state})
        or 0.0
    )


def test_a_round_publishes_with_the_realised_terms_and_its_figures() -> None:
    """Everyone declares: the round trains K, settles the rewards at (K, B) and publishes."""
    r = rig()
    before = _count("published")
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED
    assert r.store.path(round_id) == PUBLISHED_PATH
    assert r.trainer.calls == [[0, 2]]
    (settled,) = r.services.settled
    assert settled.rewards == {SMALL: Decimal("-0.5"), LARGE: Decimal("2")}
    assert settled.participants is None  # the market knows who joined: it is not told again
    assert settled.dropped == [] and not settled.refund_buyers
    assert r.services.calls[-2:] == ["settle", "measurement_published"]  # settle publishes too
    assert r.services.counted == [round_id]  # the published round now shapes the error model
    assert rnd.summary is not None
    s = rnd.summary.model_dump(mode="json")
    assert set(s) == SUMMARY_KEYS
    assert s["state"] == "published" and s["rule"] is None
    assert s["participants"] == {SMALL: 0, LARGE: 2} and s["buyers"] == {SMALL: 4, LARGE: 0}
    assert (s["price"], s["rewards"]) == ("1.000000", {SMALL: "-0.500000", LARGE: "2.000000"})
    assert rnd.quote is not None and rnd.terms is not None
    assert (s["epsilon"], s["epsilon_training"]) == (0.68, 0.8)
    assert s["epsilon_predicted"] == rnd.terms.epsilon == rnd.quote.epsilon
    assert (
        s["equilibrium"] is True
        and s["dropped"] == []
        and s["settlement"]["payments"] == "4.000000"
    )
    assert list(s["phase_seconds"]) == ["open", "collecting", "training", "evaluating", "settling"]
    assert sum(s["phase_seconds"].values()) == pytest.approx(s["round_seconds"])
    work = s["phase_seconds"]["training"] + s["phase_seconds"]["evaluating"]
    waiting = s["phase_seconds"]["collecting"]
    assert s["waiting_seconds"] == pytest.approx(waiting)
    assert s["platform_seconds"] == pytest.approx(s["round_seconds"] - work - waiting)
    assert s["platform_share"] == pytest.approx(
        s["platform_seconds"] / (s["round_seconds"] - waiting)
    )
    assert rnd.training_progress is not None and rnd.training_progress.fedavg_round == 2
    assert _count("published") == before + 1


def _error_model(r: Rig, round_id: int) -> dict[str, float]:
    """The error model the round's quote was priced on (its stored scenario's)."""
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.scenario is not None
    return rnd.scenario.error_model.model_dump()


def test_the_quote_is_priced_on_the_prior_until_the_fit_has_enough_points() -> None:
    """Evaluation down or fewer than 4 measured rounds: the prior; then the measured fit (an
    evaluation service without a posterior); with a posterior of any measured round, that."""
    r = rig()
    r.services.failing["error_model"] = Failing(ConnectionError("evaluation is down"))
    r.start()
    r.run()
    assert r.store.transitions[0][4] == "error model: prior"
    prior = _error_model(r, 1)
    assert prior == {"eps0": 0.65, "d_gamma2": 39.4, "sigma2": 0.0}
    r.services.failing.clear()
    r.services.fit = ErrorFit(eps0=0.5, d_gamma2=20.0, sigma2=0.01, r2=0.9, points=4)
    r.start()
    r.run()
    assert r.store.transitions[-5][4] == "error model: measured"
    assert _error_model(r, 2) == {
        "eps0": 0.5,
        "d_gamma2": 20.0,
        "sigma2": 0.01,
    }

    r.services.posterior = ErrorPosteriorEstimate(
        eps0=0.7, d_gamma2=30.0, sigma2=0.0, sd={"eps0": 0.1, "d_gamma2": 9.0, "sigma2": 0.01},
        points=1,
    )  # fmt: skip
    r.start()
    r.run()
    assert r.store.transitions[-5][4] == "error model: posterior of 1 measured rounds"
    assert _error_model(r, 3) == {
        "eps0": 0.7,
        "d_gamma2": 30.0,
        "sigma2": 0.0,
    }


def test_collection_waits_for_the_silent_until_the_deadline_then_they_abstain() -> None:
    """Not everyone declared: poll until the deadline, then close with those who did."""
    r = rig(collect_timeout_s=5.0, poll_interval_s=1.0)
    r.services.declared = 3
    round_id = r.start()
    r.run()
    polls = r.services.calls.count("progress")
    assert 4 <= polls <= 6  # a poll a second (plus the step's own time) for five seconds
    assert r.services.calls.count("close") == 1
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED


def test_a_round_s_own_collection_window_sets_its_deadline() -> None:
    """A round opened with collect_seconds = 3 (the settings say 30): the market's collection
    deadline and the round's collecting deadline are 3 s after it opened, and the silent abstain
    after about 3 s of polls, not 30."""
    r = rig(collect_timeout_s=30.0, poll_interval_s=1.0)
    r.services.declared = 3
    opened = r.clock.now
    round_id = r.start(collect_seconds=3.0)
    r.run()
    (payload, *_) = r.services.opened
    assert payload.collect_deadline is not None
    assert payload.collect_deadline.timestamp() == pytest.approx(opened + 3.0, abs=0.5)
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED and rnd.collect_seconds == 3.0
    assert (rnd.deadlines or {})["collecting"] == pytest.approx(opened + 3.0, abs=0.5)
    assert 2 <= r.services.calls.count("progress") <= 4


def test_no_participant_settles_by_rule_and_refunds_every_buyer() -> None:
    """Nobody joins: no model, no training; the round fails and every buyer is refunded."""
    r = rig()
    r.services.joined = {}
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert r.store.path(round_id) == ["collecting", "failed", "settled_by_rule"]
    assert rnd.rule is not None and "no participant" in rnd.rule
    assert r.trainer.calls == [] and "publish" not in r.services.calls
    (settled,) = r.services.settled
    assert settled.refund_buyers and settled.rewards == {} and settled.participants is None
    assert rnd.terms is not None and rnd.terms.price is None and rnd.terms.epsilon is None
    assert rnd.summary is not None and rnd.summary.state == S.SETTLED_BY_RULE
    assert rnd.summary.participants == {SMALL: 0, LARGE: 0}
    assert rnd.summary.settlement is not None and rnd.summary.settlement.refunds == 4
    assert list(rnd.summary.phase_seconds) == ["open", "collecting", "failed"]


def test_no_registered_client_fails_before_the_market_opens_so_nothing_is_refunded() -> None:
    r = rig()
    r.services.clients = {SMALL: [], LARGE: []}
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert rnd.rule == "no registered clients of task 'fashion-mnist': nothing to price"
    assert r.services.opened == [] and r.services.settled == []
    assert rnd.summary is not None and rnd.summary.settlement is None


def test_a_dropout_forfeits_its_reward_and_the_round_completes_with_the_others() -> None:
    """The last-registered joiner of a type that completed one fewer is named as dropped."""
    r = rig()
    r.trainer.completed = lambda k: [k[0], k[1] - 1]
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED
    assert rnd.training is not None and rnd.training.dropped == [6]
    assert r.store.transitions[2][4].endswith("dropped out: [6]")
    (settled,) = r.services.settled
    assert settled.dropped == [6] and settled.participants is None  # the market knows who joined
    assert rnd.summary is not None and rnd.summary.dropped == [6]


def test_only_participants_verified_in_every_round_are_paid() -> None:
    """The engine names who dropped out and who failed verification, by client id (not by
    registration order): both forfeit their reward and get no model; the verified one is paid,
    the buyers keep the model, and the summary says per participant how its updates fared."""
    r = rig()
    r.services.joined = {LARGE: [5, 6], SMALL: [1]}
    r.services.bought = r.services.paid = {SMALL: [2, 3, 4]}
    r.services.keys = {5: "PEM-5", 6: "PEM-6", 3: "PEM-3"}
    r.trainer.statuses = {5: "failed_verification", 1: "dropped"}
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED
    (coalition,) = r.trainer.coalitions
    assert coalition is not None and coalition.clients == [[1], [5, 6]]
    assert coalition.enrolled == [[1, 2, 3, 4], [5, 6]]
    assert coalition.node_keys == {5: "PEM-5", 6: "PEM-6", 3: "PEM-3"}
    assert rnd.terms is not None  # the priced ε: the quality gate's yardstick
    assert coalition.quoted_epsilon == rnd.terms.epsilon
    # participants first in each type (the ServerApp trains indices 0..K_i-1), then the others
    assert registered_keys(coalition) == {(1, 0): b"PEM-5", (1, 1): b"PEM-6", (0, 2): b"PEM-3"}
    assert rnd.training is not None
    assert (rnd.training.dropped, rnd.training.failed_verification) == ([1], [5])
    (settled,) = r.services.settled
    assert settled.dropped == [1, 5] and settled.participants is None
    assert rnd.summary is not None
    assert rnd.summary.verification == {"1": "dropped", "5": "failed_verification", "6": "verified"}
    assert r.store.transitions[2][4].endswith("failed verification: [5]")


def test_everyone_dropping_out_settles_by_rule() -> None:
    r = rig()
    r.trainer.completed = lambda k: [0 for _ in k]
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert rnd.rule == "no participant delivered verified updates: buyers are refunded"
    assert r.store.path(round_id) == ["collecting", "training", "failed", "settled_by_rule"]
    assert r.services.settled[-1].refund_buyers


def test_a_training_failure_settles_by_rule() -> None:
    r = rig()
    r.trainer.error = RuntimeError("the SuperLink is gone")
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert rnd.rule == (
        "training failed (RuntimeError: the SuperLink is gone): buyers are refunded, "
        "no reward is paid"
    )
    assert [p.refund_buyers for p in r.services.settled] == [True]
    assert rnd.summary is not None and rnd.summary.epsilon_training is None


def test_an_evaluation_failure_settles_by_rule() -> None:
    r = rig()
    r.services.failing["evaluate"] = Failing(TimeoutError("no answer in 120 s"))
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert rnd.rule == "TimeoutError: no answer in 120 s"
    assert r.store.path(round_id)[-3:] == ["evaluating", "failed", "settled_by_rule"]
    assert [p.refund_buyers for p in r.services.settled] == [True]
    assert "publish" not in r.services.calls


def test_a_settlement_failure_is_settled_by_rule_retried_until_the_market_answers() -> None:
    """Settling fails, so the round fails; settling by rule fails twice more and is retried."""
    r = rig()
    r.services.failing["settle"] = Failing(ConnectionError("market down"), times=3)
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert rnd.rule == "ConnectionError: market down"
    assert r.store.path(round_id)[-3:] == ["settling", "failed", "settled_by_rule"]
    assert r.services.calls.count("settle") == 4
    assert r.services.settled[-1].refund_buyers


def test_settling_by_rule_schedules_a_retry_when_the_market_does_not_answer() -> None:
    r = rig()
    r.services.joined = {}
    r.services.failing["settle"] = Failing(ConnectionError("market down"))
    round_id = r.start()
    for _ in range(3):  # open, collect (fails the round), settle by rule (fails)
        r.machine.advance(*r.queue.pop(0)[:2])
    result = r.machine.advance(round_id, S.FAILED)
    assert result.retry and result.next is None
    assert r.queue[-1] == (round_id, S.FAILED, RETRY_SETTLEMENT_S)
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.FAILED


def test_a_redelivered_step_does_nothing() -> None:
    """The round has moved on: the old step message calls no service and schedules nothing."""
    r = rig()
    round_id = r.start()
    r.machine.advance(round_id, S.OPEN)
    calls, queued = list(r.services.calls), list(r.queue)
    result = r.machine.advance(round_id, S.OPEN)
    assert result.next is None and not result.retry
    assert r.services.calls == calls and r.queue == queued
    assert r.store.path(round_id) == ["collecting"]


def test_a_step_that_loses_the_race_to_move_schedules_nothing() -> None:
    """Two deliveries run the same step; the one whose compare-and-set fails stops there."""
    r = rig()
    round_id = r.start()
    loaded = r.store.load(round_id)
    r.machine.advance(round_id, S.OPEN)  # the other delivery moved the round first
    r.queue.clear()
    original_load = r.store.load
    r.store.load = lambda _: loaded  # type: ignore[method-assign]  # read before that move
    step = r.machine.step(round_id, S.OPEN)
    r.store.load = original_load  # type: ignore[method-assign]
    assert step == Step(None)
    assert r.store.path(round_id) == ["collecting"]


def test_recovery_re_enqueues_every_unfinished_round_and_they_complete() -> None:
    """After a restart the worker schedules the current step of each unfinished round."""
    r = rig()
    done = r.start()
    r.run()
    stuck = r.start()
    r.machine.advance(*r.queue.pop(0)[:2])  # opened; its collecting step was lost with the worker
    r.queue.clear()
    assert r.machine.recover() == [stuck]
    assert r.queue == [(stuck, S.COLLECTING, 0.0)]
    r.run()
    for round_id in (done, stuck):
        rnd = r.store.load(round_id)
        assert rnd is not None and rnd.state == S.PUBLISHED


def test_one_round_at_a_time() -> None:
    r = rig()
    r.start()
    with pytest.raises(RoundInFlight, match="round 1 is still open"):
        r.store.create()


def test_a_lost_progress_write_does_not_stop_training() -> None:
    r = rig()
    r.store.progress_fails = True
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED and rnd.training_progress is None
    assert len(r.trainer.seen_progress) == 2


def test_the_quote_carries_the_rounds_subsidy_budget_or_the_settings() -> None:
    """A round's own budget (POST /v1/rounds) reaches the market in its quote; without one,
    MOTS_ROUND_SUBSIDY_BUDGET does; the settlement carries the realised price."""
    r = rig(round_subsidy_budget=Decimal(7))
    first = r.start()
    r.run()
    second = r.start(subsidy_budget_micros=2_500_000)
    r.run()
    budgets = [(q.round_id, q.subsidy_budget) for q in r.services.opened]
    assert budgets == [(first, Decimal(7)), (second, Decimal("2.5"))]
    assert all(s.price == Decimal(1) for s in r.services.settled)


def test_the_quote_carries_the_participation_bond_and_settlement_names_who_forfeits_it() -> None:
    """With a measured detection rate q = 0.4 (φ = 0.25), each type's quote holds B_i =
    (1 − φ − q)/q · C_i = 0.875 · C_i (mots.economics.bond); the settlement names the participant
    that failed verification (its bond is slashed) apart from the one that dropped out (its bond
    is returned). With the default q = 1 the quote carries no bond."""
    r = rig(bond_detection_rate=0.4)
    r.services.joined = {LARGE: [5, 6], SMALL: [1]}
    r.services.bought = r.services.paid = {SMALL: [2, 3, 4]}
    r.trainer.statuses = {5: "failed_verification", 1: "dropped"}
    r.start()
    r.run()
    (quote,) = r.services.opened
    assert quote.bonds == {SMALL: Decimal("0.4375"), LARGE: Decimal("2.625")}
    (settled,) = r.services.settled
    assert settled.dropped == [1, 5] and settled.failed_verification == [5]
    plain = rig()
    plain.start()
    plain.run()
    assert plain.services.opened[0].bonds == {}
