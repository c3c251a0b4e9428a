"""Issue 37, copies: one update sent by two participants of a round (a Sybil twin) is withheld
from both by the ``duplicate`` check (:mod:`mots.training.copies`); updates that merely point the
same way, as honest i.i.d. ones do, are not."""

from __future__ import annotations

import numpy as np
import pytest

from mots.training.copies import copied, nearest_copies
from mots.training.verification import Candidate, VerificationPolicy, verify_round


def _deltas(rng: np.random.Generator, n: int, size: int = 400) -> dict[int, np.ndarray]:
    """n updates sharing a common direction (as honest updates of one model do) plus their own
    mini-batch noise of the same size: cos ≈ 0.5 between any two, none a copy."""
    common = rng.standard_normal(size)
    return {k: common + rng.standard_normal(size) for k in range(n)}


def test_exact_copy_fails_both() -> None:
    """The twin's copy and the original are both withheld; the third update passes."""
    d = _deltas(np.random.default_rng(0), 3)
    d[7] = d[0].copy()
    failed, stats = copied(d, 0.2)
    assert set(failed) == {0, 7}
    assert {why[0] for why in failed.values()} == {"duplicate"}
    assert stats[0]["copy_distance"] == pytest.approx(0.0, abs=1e-9)
    assert stats[1]["copy_distance"] > 0.5


@pytest.mark.parametrize("scale, noise", [(0.85, 0.0), (1.15, 0.0), (1.0, 0.1), (0.95, 0.1)])
def test_near_copies_fail(scale: float, noise: float) -> None:
    """A copy rescaled by 0.85-1.15 or with noise of 10% of its size is still a copy."""
    rng = np.random.default_rng(1)
    d = _deltas(rng, 3)
    n = rng.standard_normal(d[0].size)
    d[9] = scale * d[0] + noise * np.linalg.norm(d[0]) * n / np.linalg.norm(n)
    failed, _ = copied(d, 0.2)
    assert set(failed) == {0, 9}


def test_distinct_updates_pass_and_distance_is_relative_to_the_larger() -> None:
    """Updates with a shared direction but their own noise are far apart; the distance of
    c·Δ to Δ is |1 − c| for c ≤ 1 (relative to the larger norm)."""
    d = _deltas(np.random.default_rng(2), 6)
    assert copied(d, 0.2)[0] == {}
    near = nearest_copies({0: d[0], 1: 0.5 * d[0]})
    assert near[0][0] == 1 and near[0][1] == pytest.approx(0.5)
    assert nearest_copies({0: d[0]}) == {}
    zero = np.zeros_like(d[0])
    assert copied({0: zero, 1: zero.copy()}, 0.2)[0] == {}  # two free riders: free_riding's


def test_verify_round_withholds_both_copies() -> None:
    """Through verify_round (the ServerApp's and the in-process path's verification): the pair
    fails ``duplicate``, the others are verified (on today's main both copies were verified)."""
    rng = np.random.default_rng(3)
    g = [np.zeros((20, 20), dtype=np.float32)]
    ups = {k: (v.reshape(20, 20)).astype(np.float32) for k, v in _deltas(rng, 3).items()}
    ups[5] = ups[1].copy()
    cands = [Candidate(k, [u], 50, 640, 50) for k, u in ups.items()]
    res = verify_round(g, cands, VerificationPolicy(), expected_samples=640)
    by_key = {v.key: v for v in res.verdicts}
    assert by_key[1].check == by_key[5].check == "duplicate"
    assert not by_key[1].accepted and not by_key[5].accepted
    assert by_key[0].accepted and by_key[2].accepted
