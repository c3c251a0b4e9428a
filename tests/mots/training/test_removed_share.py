"""Issue 24, item 1 on Flower: a participant removed (revoked or departed) while the run trains
leaves the market's K, so it leaves the denominator of ``min_share`` too. Before the fix it counted
as a drop-out against the survivors: 2 honest survivors of 4 chosen, 2 of them removed, failed a
run at ``min_share`` 0.75 (2 < 3), which the in-process engine (no such check) published."""

from __future__ import annotations

import pytest

from mots.training.participants import DROPPED, Participant, RunFailedError, check_share
from mots.training.removal import REMOVED_REASON
from mots.training.verification import VerificationPolicy


def _chosen(removed: int, dropped: int, n: int = 4) -> list[Participant]:
    ps = [Participant(node_id=i + 1, type_index=0, client_index=i) for i in range(n)]
    for p in ps[:removed]:
        p.leave(DROPPED, 1, REMOVED_REASON)
    for p in ps[removed : removed + dropped]:
        p.leave(DROPPED, 1, "no reply by the round's deadline")
    return ps


def test_removed_participants_leave_the_share_denominator() -> None:
    """Two of four removed, two verified survivors at min_share 0.75: the survivors suffice
    (2 ≥ ⌈0.75 × 2⌉); two drop-outs instead of removals still fail the run (2 < ⌈0.75 × 4⌉)."""
    pol = VerificationPolicy(min_share=0.75)
    check_share(_chosen(removed=2, dropped=0), pol, "round 2")
    with pytest.raises(RunFailedError):
        check_share(_chosen(removed=0, dropped=2), pol, "round 2")
    with pytest.raises(RunFailedError):  # one removal, one drop-out: 2 of 3 left < ⌈2.25⌉
        check_share(_chosen(removed=1, dropped=1), pol, "round 2")


def test_everyone_removed_leaves_nothing_to_train() -> None:
    """All chosen removed: the run cannot go on (nobody is left to train)."""
    with pytest.raises(RunFailedError):
        check_share(_chosen(removed=4, dropped=0), VerificationPolicy(min_share=0.5), "round 1")
