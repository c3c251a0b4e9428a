"""Issue 24: garbage data, stale replays, noise-diluted and lazy updates sent by a MAJORITY of
the round (3 honest nodes, 5 attackers) on a real local federation (SuperLink, SuperNodes and
resident trainers as processes, TLS and authentication): every attacker fails verification and
is not paid, the honest three are verified, and the model is published."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.integrity.federation_majority import majority_attacks
from tests.benchmarks.test_integrity_federation import no_strays  # noqa: F401

pytestmark = [pytest.mark.integration]


def test_majority_attacks_caught_and_unpaid(tmp_path: Path) -> None:
    """Each row caught in every try, nothing paid; no honest participant-round flagged.

    ``lazy_steps`` (E/4 of the steps, a D = 50 participant here) was an expected failure within
    these 2 rounds while too_little_work judged the norm alone (0.25 of the draws' median at
    D = 50 from round 1, where an honest D = 50 update falls as low; docs/training.md). Round 0's
    check (the model carries no participant's data, so the server's draws are the honest
    distribution itself) weighs the norm with the first layer's top-direction share and catches
    it there (issue 24; 0.70 bound, E/4 at D = 50 at most 0.68 and honest at least 0.70 in
    process)."""
    out = majority_attacks(tmp_path, rounds=2, seed=0)
    for name in ("garbage_data_majority", "stale_replay", "noise_diluted", "lazy_steps"):
        a = out.attacks[name]
        assert a.tried > 0 and a.refused_or_caught == a.tried, (name, a.detail)
        assert a.paid == "0", (name, a.detail)
    assert out.honest_rounds == 3 * 2 and out.honest_flagged == 0
    assert out.published == [True]
