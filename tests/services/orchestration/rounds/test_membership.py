"""A round prices and trains the population it opened with: decisions of clients outside it
(registered after it opened) are not in K or B."""

from __future__ import annotations

from mots.platform.api.base import RoundState
from tests.services.orchestration.rounds.fakes import LARGE, SMALL, rig


def test_decisions_of_clients_outside_the_round_are_left_out() -> None:
    """Client 7 registered after the round opened and declared join, client 8 bought: the
    round still trains K = (0, 2) and counts B = (4, 0), and publishes."""
    r = rig()
    r.services.joined = {LARGE: [5, 6, 7]}
    r.services.bought = {SMALL: [1, 2, 3, 4, 8]}
    r.services.paid = {SMALL: [1, 2, 3, 4, 8]}
    round_id = r.start()
    r.run()
    rnd = r.store.load(round_id)
    assert rnd is not None and rnd.state == RoundState.PUBLISHED
    assert rnd.decisions is not None
    assert rnd.decisions.participants == {LARGE: [5, 6]}
    assert rnd.decisions.paid_buyers == {SMALL: [1, 2, 3, 4]}
    assert r.trainer.calls == [[0, 2]]
    assert r.services.settled[-1].participants == [5, 6]
