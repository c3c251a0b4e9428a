"""A round is pinned to its task's version at its open (issue 36), on the machine's in-memory
fakes: a version the market stores mid-round neither prices, trains nor measures it, and a task
file edited to another version settles the round by rule instead of mixing the two."""

from __future__ import annotations

import os

import pytest

from mots.economics.utility import PowerUtility
from mots.platform.api.base import RoundState
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import EvaluationRequest, EvaluationResult
from mots.tasks.task_file import SHIPPED_DIR, TASKS_DIR_ENV
from services.orchestration.rounds.task_economics import check_task, task_file
from tests.mots.tasks.test_stored import NAME, URL, FakeMarket, fake_market, task_text
from tests.services.orchestration.rounds.fakes import Clock, FakeServices, rig

S = RoundState


@pytest.fixture
def market(monkeypatch: pytest.MonkeyPatch) -> FakeMarket:
    """The market's stored versions, faked (:func:`tests.mots.tasks.test_stored.fake_market`)."""
    return fake_market(monkeypatch)


class Evaluations(FakeServices):
    """The scripted services, noting the task version each evaluation was asked for."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.evaluated: list[int | None] = []

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        self.evaluated.append(request.task_version)
        return super().evaluate(request)


def test_a_version_stored_mid_round_applies_to_the_next_round_only(market) -> None:
    """Opened on version 1 (U(ε) scale 2), the round is priced with version 1's U(ε) although
    version 2 (scale 5, another architecture) is stored before its first step; its training and
    evaluation are asked for version 1; a new round would be pinned to version 2."""
    market.store(task_text(1, scale=2.0))
    r = rig(Evaluations, market_internal_url=URL)
    version = check_task(NAME, r.settings)
    assert version == 1
    round_id = r.store.create(task=NAME, task_version=version)
    market.store(task_text(2, scale=5.0, hidden=64))
    r.queue.append((round_id, S.OPEN, 0.0))
    r.run(max_steps=200)

    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.PUBLISHED, rnd
    assert rnd.task_version == 1
    assert rnd.scenario is not None
    assert rnd.scenario.utility == PowerUtility(scale=2.0, exponent=2.0)
    assert [c.task_version for c in r.trainer.coalitions if c is not None] == [1]
    assert r.services.evaluated == [1]
    assert task_file(NAME, r.settings, 1).model.args == {"hidden": [32]}
    assert check_task(NAME, r.settings) == 2


def test_a_task_file_edited_to_another_version_settles_the_round_by_rule(
    tmp_path, monkeypatch
) -> None:
    """Opened on the file's version 1, the round meets the file at version 2 at its first step:
    it is settled by rule with a rule naming both versions, never priced on either."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    monkeypatch.setenv(TASKS_DIR_ENV, str(folder))
    path = folder / f"{NAME}.yaml"
    path.write_text(task_text(1), encoding="utf-8")
    r = rig(Evaluations)
    assert check_task(NAME, r.settings) == 1
    round_id = r.store.create(task=NAME, task_version=1)
    path.write_text(task_text(2, scale=5.0), encoding="utf-8")
    later = path.stat().st_mtime_ns + 1_000_000_000  # a changed file, even on a coarse clock
    os.utime(path, ns=(later, later))
    r.queue.append((round_id, S.OPEN, 0.0))
    r.run(max_steps=50)

    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE, rnd
    assert rnd.rule is not None
    assert "now declares version 2" in rnd.rule and "opened on version 1" in rnd.rule
    assert rnd.quote is None and r.services.opened == []
    with pytest.raises(Exception, match="now declares version 2"):
        task_file(NAME, r.settings, 1)


def test_the_default_tasks_round_opens_when_its_task_file_is_unusable(
    tmp_path, monkeypatch, caplog
) -> None:
    """The default task is priced and trained by the deployment's settings, not its file: a
    fashion-mnist.yaml whose scenario file is missing (as in an image that copied the task files
    only: the compose round refused every fashion-mnist round with a 404) pins no version and
    says why in the log, instead of refusing the round."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    shipped = (SHIPPED_DIR / f"{DEFAULT_TASK}.yaml").read_text(encoding="utf-8")
    (folder / f"{DEFAULT_TASK}.yaml").write_text(shipped, encoding="utf-8")  # no ../scenarios
    monkeypatch.setenv(TASKS_DIR_ENV, str(folder))
    r = rig(Evaluations)
    with caplog.at_level("WARNING", logger="services.orchestration.rounds.task_economics"):
        assert check_task(DEFAULT_TASK, r.settings) is None
    assert "cannot read scenario file" in caplog.text
