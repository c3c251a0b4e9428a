"""Anchored checks (issue 24): each attack fails the check made for it against the server's own
references, an honest update passes, and no verdict depends on the other updates of the round
(attackers in the majority cannot move it)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.training.anchored import AnchorTolerance, References, judge
from mots.training.verification import Candidate, VerificationPolicy, verify_round

ROWS, N, K = 4, 12, 3
BASIS = np.eye(N)[:K]  # the real inputs span the first K coordinates
G = [np.zeros((ROWS, N), np.float32), np.zeros(ROWS, np.float32)]


def honest_delta(seed: int, scale: float = 1.0) -> np.ndarray:
    """A first layer in the inputs' span (a little outside), a bias, flattened."""
    r = np.random.default_rng(seed)
    w = np.zeros((ROWS, N))
    w[:, :K] = 1.0 + 0.2 * r.standard_normal((ROWS, K))
    w[:, K:] = 0.05 * r.standard_normal((ROWS, N - K))
    return scale * np.concatenate([w.ravel(), 0.1 * r.standard_normal(ROWS)])


REFS = References(np.stack([honest_delta(100 + t) for t in range(8)]), BASIS, (0, ROWS, N))
ZERO = np.zeros(ROWS * N + ROWS)


def check(
    delta: np.ndarray, history: list[tuple[np.ndarray, np.ndarray]] | None = None
) -> str | None:
    return judge(delta, ZERO, REFS, history or [], AnchorTolerance()).check


def test_honest_passes_and_each_attack_fails_its_check() -> None:
    """Honest: none; off-span (garbage, noise-diluted): off_data; replay: stale; lazy: too little
    work."""
    h = honest_delta(1)
    assert check(h) is None
    garbage = np.random.default_rng(2).standard_normal(h.shape) * np.linalg.norm(h) / 10
    assert check(garbage) == "off_data"
    noise = np.random.default_rng(3).standard_normal(h.shape)
    diluted = 0.5 * h + noise * 0.5 * np.linalg.norm(h) / np.linalg.norm(noise)
    assert check(diluted) == "off_data"
    assert check(h, [(ZERO + h, h)]) == "stale"  # the same update again
    assert check(h + 1e-4, [(ZERO + h, h)]) == "stale"  # within the replay distance
    assert check(h, [(ZERO + honest_delta(9), honest_delta(9))]) is None
    assert check(0.3 * h) == "too_little_work"


def test_without_basis_off_data_is_skipped() -> None:
    """A model whose first layer has no input basis (the CNN) skips off_data only."""
    refs = References(REFS.deltas)
    garbage = np.random.default_rng(2).standard_normal(ZERO.shape) * 2.0
    assert judge(garbage, ZERO, refs).check is None
    assert judge(0.2 * honest_delta(1), ZERO, refs).check == "too_little_work"


def _cand(key: int, delta: np.ndarray) -> Candidate:
    w = [
        delta[: ROWS * N].reshape(ROWS, N).astype(np.float32),
        delta[ROWS * N :].astype(np.float32),
    ]
    return Candidate(key, w, 50, 640, 50)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["garbage", "lazy", "copy"]), min_size=0, max_size=9))
def test_verdict_does_not_depend_on_the_peers(attackers: list[str]) -> None:
    """An honest update and an off-span one get the same verdicts alone and beside any number of
    attackers (a majority included)."""
    pol = VerificationPolicy(harm_check="off")
    h, bad = honest_delta(5), np.random.default_rng(6).standard_normal(ZERO.shape)
    mine = [_cand(1, h), _cand(2, bad)]
    others = []
    for n, kind in enumerate(attackers):
        d = {"garbage": np.random.default_rng(n).standard_normal(ZERO.shape), "lazy": 0.2 * h}
        others.append(_cand(10 + n, d.get(kind, honest_delta(50 + n))))

    def verdicts(cands: list[Candidate]) -> dict[int, str | None]:
        res = verify_round(
            G,
            cands,
            pol,
            reference_update=[G[0] + REFS.deltas[0][: ROWS * N].reshape(ROWS, N), G[1]],
            expected_samples=640,
            anchored={50: REFS},
        )
        return {v.key: v.check for v in res.verdicts if v.key in (1, 2)}

    alone = verdicts(mine)
    assert alone == {1: None, 2: "off_data"}
    assert verdicts(others + mine) == alone
