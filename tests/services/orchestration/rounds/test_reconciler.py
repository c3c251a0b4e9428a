"""The reconciler on fakes: per-state deadlines, re-driving a round whose step message was lost,
steps whose service call got no answer running again instead of failing; and retention: the last
N rounds' artifacts stay, and those a buyer or participant may still download (within the
download window); the rest are deleted and their rows marked."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from mots.platform.api.base import RoundState
from services.orchestration.rounds.machine import deadline_of
from services.orchestration.rounds.ports import ServiceUnavailable
from services.orchestration.rounds.reconciler import Reconciler, expire_artifacts
from tests.services.orchestration.rounds.fakes import Failing, Rig, rig

S = RoundState
PUBLISHED_PATH = ["collecting", "training", "evaluating", "settling", "published"]


def _redriven(state: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "mots_rounds_redriven_total", {"task": "fashion-mnist", "state": state}
        )
        or 0.0
    )


def _run_until(r: Rig, state: RoundState, round_id: int) -> None:
    """Deliver steps until the round is in ``state`` (its next step stays queued)."""
    for _ in range(100):
        rnd = r.store.load(round_id)
        if rnd is not None and rnd.state == state:
            return
        round_id_, st, countdown = r.queue.pop(0)
        r.clock.now += countdown + 0.25
        r.machine.advance(round_id_, st)
    raise AssertionError(f"round {round_id} never reached {state}")


def test_every_state_entered_records_its_deadline() -> None:
    """Collecting ends at the collection deadline; training, evaluating and settling at entry
    plus their budget (training timeout, evaluation timeout, one service call)."""
    r = rig(train_timeout_s=300.0, evaluate_timeout_s=40.0, task_timeout_s=20.0)
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED and rnd.deadlines is not None
    assert set(rnd.deadlines) == {"collecting", "training", "evaluating", "settling"}
    assert rnd.deadlines["collecting"] == rnd.collect_deadline
    times = _entry_times(r, round_id)
    assert rnd.deadlines["training"] - times["training"] == pytest.approx(300.0)
    assert rnd.deadlines["evaluating"] - times["evaluating"] == pytest.approx(40.0)
    assert rnd.deadlines["settling"] - times["settling"] == pytest.approx(20.0)


def _entry_times(r: Rig, round_id: int) -> dict[str, float]:
    """When the round entered each state, from the clock the fake store moved by."""
    start = r.store.rounds[round_id].created_at.timestamp()
    at, out = start, {}
    for rid, _, dst, seconds, _ in r.store.transitions:
        if rid == round_id:
            at += seconds
            out[dst.value] = at
    return out


def test_a_lost_step_message_is_re_driven_after_the_deadline() -> None:
    """The collecting round's poll message is lost (the queue is emptied, as a Redis restart
    without persistence would): the reconciler sends it again once the deadline and one
    interval of grace have passed; the round then publishes."""
    r = rig(collect_timeout_s=10.0, reconcile_interval_s=5.0)
    r.services.declared = 3  # three of six clients are silent: the round waits for the deadline
    reconciler = Reconciler(r.machine.ports)
    round_id = r.start()
    _run_until(r, S.COLLECTING, round_id)
    r.queue.clear()  # the message is lost
    rnd = r.store.load(round_id)
    assert rnd is not None
    deadline = deadline_of(rnd, r.settings)
    r.clock.now = deadline + 4.9  # within the grace: nothing to do yet
    assert reconciler.tick() == []
    before = _redriven("collecting")
    r.clock.now = deadline + 5.1
    assert reconciler.tick() == [round_id]
    assert _redriven("collecting") == before + 1
    assert reconciler.tick() == []  # not twice within resend_after_s
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED
    assert r.store.path(round_id) == PUBLISHED_PATH
    assert reconciler.tick() == []  # a finished round is never re-driven


def test_an_overdue_round_is_re_driven_again_while_it_stays_overdue() -> None:
    """A re-drive that is lost too: the round is sent again after ``resend_after_s``."""
    r = rig(task_timeout_s=10.0, reconcile_interval_s=2.0)
    reconciler = Reconciler(r.machine.ports, resend_after_s=30.0)
    round_id = r.start()
    r.queue.clear()  # the open step is lost
    r.clock.now += 13.0
    assert reconciler.tick() == [round_id]
    r.queue.clear()  # lost again
    r.clock.now += 29.0
    assert reconciler.tick() == []
    r.clock.now += 2.0
    assert reconciler.tick() == [round_id]
    r.run()
    assert r.store.path(round_id) == PUBLISHED_PATH


def test_a_lost_evaluation_is_asked_again_not_settled_by_rule() -> None:
    """The evaluation gets no answer twice (its task lost): the step runs again while the
    trained model exists, and the round publishes with the model it trained."""
    r = rig(evaluate_timeout_s=5.0)
    r.services.failing["evaluate"] = Failing(ServiceUnavailable("evaluation.evaluate lost"), 2)
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED
    assert r.services.calls.count("evaluate") == 3
    assert len(r.trainer.calls) == 1  # trained once
    retry = REGISTRY.get_sample_value(
        "mots_round_step_retries_total", {"task": "fashion-mnist", "state": "evaluating"}
    )
    assert retry is not None and retry >= 2


def test_a_lost_evaluation_without_its_model_is_settled_by_rule() -> None:
    """The trained model's file is gone: nothing to evaluate, the round is settled by rule."""
    r = rig()
    r.services.failing["evaluate"] = Failing(ServiceUnavailable("evaluation.evaluate lost"))
    r.missing_artifacts.add("/artifacts/round-1/model.pt")
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert r.services.settled[-1].refund_buyers


def test_a_lost_call_is_retried_until_the_deadline_plus_one_call() -> None:
    """The market's population gets no answer: the open step runs again every retry interval,
    and fails the round once its deadline plus one service call's timeout has passed."""
    r = rig(task_timeout_s=10.0, retry_interval_s=2.0)
    r.services.failing["population"] = Failing(ServiceUnavailable("market.population lost"))
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert "market.population lost" in (rnd.rule or "")
    tries = r.services.calls.count("population")
    assert 8 <= tries <= 11  # ~20 s of 2.25 s tries


def test_a_lost_call_that_comes_back_keeps_the_round() -> None:
    """The market's close gets no answer once (Redis restarted): the round still publishes."""
    r = rig()
    r.services.failing["close"] = Failing(ServiceUnavailable("market.close_round lost"), 1)
    round_id = r.start()
    r.run()
    assert r.store.path(round_id) == PUBLISHED_PATH


def test_a_step_that_cannot_reach_the_store_runs_again() -> None:
    """The rounds database is away when a step loads its round: the step is scheduled again."""
    r = rig(retry_interval_s=3.0)
    round_id = r.start()
    load = r.store.load
    fails = [1]

    def flaky(rid: int):  # type: ignore[no-untyped-def]
        if fails:
            fails.pop()
            raise ServiceUnavailable("the rounds database: connection terminated")
        return load(rid)

    r.store.load = flaky  # type: ignore[method-assign]
    result = r.machine.advance(round_id, S.OPEN)
    assert result.retry and r.queue[-1] == (round_id, S.OPEN, 3.0)
    r.queue.pop(0)  # the original open message was delivered above
    r.run()
    assert r.store.path(round_id) == PUBLISHED_PATH


def test_the_schedule_opens_rounds_after_the_interval_until_the_maximum() -> None:
    """With MOTS_ROUND_INTERVAL_S the next round opens that long after the previous ended, and
    the schedule stops at MOTS_ROUNDS_MAX rounds; without it nothing opens by itself."""
    manual = rig()
    assert Reconciler(manual.machine.ports).tick() == [] and manual.store.rounds == {}
    r = rig(round_interval_s=30.0, rounds_max=2)
    reconciler = Reconciler(r.machine.ports)
    reconciler.tick()
    assert list(r.store.rounds) == [1]  # the first round opens at once
    r.run()
    rnd = r.store.load(1)
    assert rnd is not None and rnd.state == S.PUBLISHED
    r.clock.now = rnd.state_entered_at.timestamp() + 29.0
    reconciler.tick()
    assert list(r.store.rounds) == [1]  # not yet
    r.clock.now += 1.5
    reconciler.tick()
    assert list(r.store.rounds) == [1, 2]
    reconciler.tick()
    assert list(r.store.rounds) == [1, 2]  # one at a time
    r.run()
    r.clock.now += 3600.0
    reconciler.tick()
    assert list(r.store.rounds) == [1, 2]  # the maximum is reached
    assert [p.round_id for p in r.services.opened] == [1, 2]


def test_the_quote_carries_its_collection_deadline() -> None:
    """The market gets the deadline with the quote; the round keeps the same one."""
    r = rig(collect_timeout_s=45.0)
    round_id = r.start()
    r.run()
    (opened,) = r.services.opened
    rnd = r.store.load(round_id)
    assert rnd is not None and opened.collect_deadline is not None
    assert opened.collect_deadline.timestamp() == pytest.approx(rnd.collect_deadline)
    assert rnd.collect_deadline == pytest.approx(rnd.created_at.timestamp() + 45.25)


def _rounds(r: Rig, n: int, root: Path) -> list[Path]:
    """Run ``n`` rounds whose trainer writes a real artifact directory under ``root``."""
    dirs = []
    for _ in range(n):
        round_id = r.start()
        r.trainer.artifact_root = root
        r.run()
        rnd = r.store.load(round_id)
        assert rnd is not None and rnd.state == RoundState.PUBLISHED and rnd.training is not None
        dirs.append(Path(rnd.training.artifact_path).parent)
    return dirs


def test_only_the_last_rounds_and_the_download_window_are_kept(tmp_path: Path) -> None:
    """Five rounds, keep 2, a 100 s window: nothing goes while every round is within the window;
    an hour later rounds 1-3 lose their files (rows marked) and 4-5 keep theirs; a second sweep
    finds nothing more."""
    r = rig(artifact_retention_rounds=2, download_window_s=100.0)
    dirs = _rounds(r, 5, tmp_path)
    assert all(d.is_dir() for d in dirs)
    assert expire_artifacts(r.machine.ports) == []  # everyone may still download
    r.clock.now += 3600.0
    assert expire_artifacts(r.machine.ports) == [3, 2, 1]
    assert [d.exists() for d in dirs] == [False, False, False, True, True]
    marked = [r.store.rounds[i].artifact_expired_at is not None for i in range(1, 6)]
    assert marked == [True, True, True, False, False]
    assert expire_artifacts(r.machine.ports) == []


def test_without_a_retention_setting_every_artifact_stays(tmp_path: Path) -> None:
    """Unset MOTS_ARTIFACT_RETENTION_ROUNDS: the reconciler's passes delete nothing."""
    r = rig()
    dirs = _rounds(r, 3, tmp_path)
    r.clock.now += 10 * 86400.0
    Reconciler(r.machine.ports).tick()
    assert all(d.is_dir() for d in dirs)
