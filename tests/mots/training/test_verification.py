"""Update verification: each check on crafted updates, its invariants, the quality gate, and the
honest false-positive rate measured on real training over several seeds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.training.config import TrainConfig
from mots.training.quality_gate import quality_gate
from mots.training.verification import (
    Candidate,
    VerificationPolicy,
    accept_all,
    cosine,
    robust_low,
    verify_round,
)

RNG = np.random.default_rng(7)
GLOBAL = [np.zeros((4, 5), np.float32), np.zeros(4, np.float32)]
DIRECTION = [
    RNG.standard_normal((4, 5)).astype(np.float32),
    RNG.standard_normal(4).astype(np.float32),
]


NEAR = VerificationPolicy(copy_distance=0.0)
"""For crafted honest updates a few % apart: only exact copies are duplicates."""


def honest(seed: int, noise: float = 0.3) -> list[np.ndarray]:
    """A model one honest step away: the common direction plus a little noise."""
    r = np.random.default_rng(seed)
    return [
        (g + d + noise * r.standard_normal(d.shape)).astype(np.float32)
        for g, d in zip(GLOBAL, DIRECTION, strict=True)
    ]


def cand(key: int, weights: list[np.ndarray], size: int = 50, samples: int = 640) -> Candidate:
    return Candidate(key, weights, size, samples, 50)


def run(cands: list[Candidate], **kw: object) -> dict[int, tuple[bool, str | None]]:
    res = verify_round(
        GLOBAL, cands, VerificationPolicy(), reference_update=DIRECTION, expected_samples=640, **kw
    )  # type: ignore[arg-type]
    return {v.key: (v.accepted, v.check) for v in res.verdicts}


def test_honest_updates_pass_and_each_attack_fails_its_check() -> None:
    """Honest updates are accepted; each corrupted one fails the check made for it."""
    cands = [cand(k, honest(k)) for k in range(6)]
    cands += [
        cand(10, [a[:2] for a in honest(10)]),  # wrong shape
        cand(11, [np.where(a > 0, np.nan, a).astype(np.float32) for a in honest(11)]),
        cand(12, honest(12), size=300),  # reports more data than it declared
        cand(13, honest(13), samples=64),  # drew fewer samples than E·b
        cand(14, [g.copy() for g in GLOBAL]),  # free rider
        cand(15, [(a * 50 + 5).astype(np.float32) for a in honest(15)]),  # scaled
        cand(16, [(g - d).astype(np.float32) for g, d in zip(GLOBAL, DIRECTION, strict=True)]),
    ]
    got = run(cands)
    assert all(got[k] == (True, None) for k in range(6))
    assert got[10] == (False, "shape")
    assert got[11] == (False, "finite")
    assert got[12] == (False, "reported") and got[13] == (False, "reported")
    assert got[14] == (False, "free_riding")
    assert got[15] == (False, "norm")
    assert got[16] == (False, "direction")  # the sign-flipped update: cos(Δ, Δ_ref) = −1


def test_noise_of_honest_size_is_an_outlier_among_peers() -> None:
    """With enough peers, an update pointing nowhere is far below their cosines to the median."""
    r = np.random.default_rng(3)
    noise = [(g + 1.2 * r.standard_normal(g.shape)).astype(np.float32) for g in GLOBAL]
    cands = [cand(k, honest(k, noise=0.1)) for k in range(6)] + [cand(9, noise)]
    # NEAR: these crafted honest updates are one direction plus 10% noise, nearer each other
    # than the duplicate check allows (real honest ones came no nearer than 0.6, test_copies.py)
    res = verify_round(GLOBAL, cands, NEAR, expected_samples=640)
    verdict = {v.key: v for v in res.verdicts}
    assert not verdict[9].accepted and verdict[9].check == "direction"
    assert "peers" in verdict[9].detail
    assert all(verdict[k].accepted for k in range(6))


def test_harm_on_validation_loss() -> None:
    """An update whose model the server's validation loss finds far worse than the sent model
    and the server's own update is left out (harm_check reference); leave_one_out also works."""
    target = [(g + d).astype(np.float32) for g, d in zip(GLOBAL, DIRECTION, strict=True)]

    def loss(w: list[np.ndarray]) -> float:
        return 1.0 + float(sum(np.sum((a - t) ** 2) for a, t in zip(w, target, strict=True)))

    bad = [(g + 1.5 * d + 2.0).astype(np.float32) for g, d in zip(GLOBAL, DIRECTION, strict=True)]
    cands = [cand(k, honest(k, 0.05)) for k in range(3)] + [cand(5, bad)]
    res = verify_round(
        GLOBAL,
        cands,
        NEAR.model_copy(update={"max_norm_ratio": 100.0, "min_cosine": -1.0}),
        reference_update=DIRECTION,
        validation_loss=loss,
        expected_samples=640,
    )
    got = {v.key: v for v in res.verdicts}
    assert got[5].check == "harmful" and all(got[k].accepted for k in range(3))
    assert got[0].stats["val_loss"] < got[0].stats["val_loss_without"]
    loo = verify_round(
        GLOBAL,
        cands,
        NEAR.model_copy(
            update={"max_norm_ratio": 100.0, "min_cosine": -1.0, "harm_check": "leave_one_out"}
        ),
        validation_loss=loss,
        expected_samples=640,
    )
    assert [v.key for v in loo.verdicts if not v.accepted] == [5]


def test_the_harm_base_is_the_worst_of_the_servers_honest_draws() -> None:
    """A model whose validation loss is 2.5 × the worse of L(w) and L(w + Δ_ref) is harmful on
    one reference draw, and within bounds once a further honest draw of the server overshot as
    far (reference_losses); the draws raise the base, never lower it."""
    losses = {"global": 1.0, "reference": 1.2, "candidate": 3.0}

    def loss(w: list[np.ndarray]) -> float:
        if all(np.array_equal(a, g) for a, g in zip(w, GLOBAL, strict=True)):
            return losses["global"]
        if all(np.allclose(a, g + d) for a, g, d in zip(w, GLOBAL, DIRECTION, strict=True)):
            return losses["reference"]
        return losses["candidate"]

    def verdict(reference_losses: list[float]) -> tuple[bool, str | None]:
        res = verify_round(
            GLOBAL,
            [cand(1, honest(1, 0.05))],
            VerificationPolicy(),
            reference_update=DIRECTION,
            validation_loss=loss,
            expected_samples=640,
            reference_losses=reference_losses,
        )
        return res.verdicts[0].accepted, res.verdicts[0].check

    assert verdict([]) == (False, "harmful")  # 3.0 > 2 × 1.2
    assert verdict([0.5, 1.6]) == (True, None)  # 3.0 ≤ 2 × 1.6
    assert verdict([0.1]) == (False, "harmful")  # a lower draw does not lower the base


@pytest.mark.slow
def test_two_honest_large_participants_pass_the_first_round(fashion_dir: Path) -> None:
    """The README journey's round (K = 2 large clients, D = 300, the orchestration's defaults
    E = 20, b = 32, η0 = 0.5, seed 0): on one reference draw the server flags pi-1's honest
    first update as harmful (its validation loss 7.5 > 2 × 3.2); with the default draws both
    pass."""
    from mots.training.datasets import load_dataset
    from mots.training.fedavg import learning_rate
    from mots.training.holdout import Holdout
    from mots.training.local import batch_indices, client_data, torch_threads, train_local
    from mots.training.models import build_model, get_weights, set_weights

    cfg = TrainConfig(data_dir=fashion_dir, sizes=(50, 300), counts=(1, 2), test_subset=2000)
    ds = load_dataset(cfg.dataset, cfg.data_dir)
    policy = VerificationPolicy()
    ho = Holdout.build(cfg, ds, policy.holdout)
    assert ho is not None
    net = build_model(cfg.model, ds.input_shape, ds.num_classes, zero_init=True, seed=cfg.seed)
    w = get_weights(net)
    cands = []
    for j in range(2):
        data = client_data(cfg, 1, j, ds)
        with torch_threads(1):
            set_weights(net, w)
            idx = batch_indices(cfg.seed, 0, data.pid, data.size, cfg.local_steps, cfg.batch_size)
            train_local(net, data, idx, learning_rate(cfg.lr, 0))
        cands.append(Candidate(j, get_weights(net), data.size, 640, 300))

    def checks(pol: VerificationPolicy) -> list[str | None]:
        res = verify_round(
            w,
            cands,
            pol,
            reference_update=ho.reference_update(w, 0),
            validation_loss=ho.loss,
            expected_samples=640,
            reference_losses=ho.reference_losses(w, 0, pol.reference_draws),
        )
        return [v.check for v in res.verdicts]

    assert checks(policy.model_copy(update={"reference_draws": 1})) == ["harmful", None]
    assert checks(policy) == [None, None]


def test_reported_check_can_be_turned_off_and_accept_all() -> None:
    """check_reported=False ignores self-reports; accept_all accepts anything (verify=False)."""
    cands = [cand(k, honest(k)) for k in range(3)] + [cand(4, honest(4), size=999)]
    res = verify_round(
        GLOBAL, cands, VerificationPolicy(check_reported=False), reference_update=DIRECTION
    )
    assert all(v.accepted for v in res.verdicts)
    assert all(v.accepted for v in accept_all([cand(1, [np.full(3, np.nan)])]).verdicts)


def test_without_reference_or_peers_only_array_checks_run() -> None:
    """One update, no anchor: no scale to measure against, so only shape/finite/reported."""
    res = verify_round(GLOBAL, [cand(1, [g.copy() for g in GLOBAL])], VerificationPolicy())
    assert res.scale == 0.0 and res.verdicts[0].accepted


@settings(max_examples=40, deadline=None)
@given(
    order=st.permutations(list(range(8))),
    factor=st.floats(min_value=1e-3, max_value=1e3),
)
def test_verdicts_do_not_depend_on_order_or_units(order: list[int], factor: float) -> None:
    """Shuffling the candidates, or measuring every update in other units (Δ and Δ_ref scaled
    alike), changes no verdict: the checks are ratios and angles."""
    base = [cand(k, honest(k)) for k in range(6)]
    base += [cand(6, [g.copy() for g in GLOBAL]), cand(7, [(a * 50 + 5) for a in honest(7)])]
    want = run(base)
    shuffled = [base[i] for i in order]
    assert run(shuffled) == want
    scaled = [cand(c.key, [(a * factor).astype(np.float32) for a in c.weights]) for c in base]
    res = verify_round(
        GLOBAL,
        scaled,
        VerificationPolicy(),
        reference_update=[(d * factor).astype(np.float32) for d in DIRECTION],
        expected_samples=640,
    )
    assert {v.key: (v.accepted, v.check) for v in res.verdicts} == want


@given(st.lists(st.floats(-1, 1), min_size=3, max_size=30), st.floats(0.5, 6))
def test_robust_low_is_below_the_median(values: list[float], z: float) -> None:
    """The outlier bound lies at least z·floor below the median."""
    assert robust_low(values, z, 0.1) <= float(np.median(values)) - z * 0.1 + 1e-12


def test_cosine_of_zero_vector_is_zero() -> None:
    assert cosine(np.zeros(3), np.ones(3)) == 0.0
    assert math.isclose(cosine(np.ones(3), 2 * np.ones(3)), 1.0)


def test_quality_gate() -> None:
    """Non-finite, or worse than quality_factor × the untrained model's or the quoted ε: refused."""
    pol = VerificationPolicy(quality_factor=2.0)
    ok = quality_gate(0.7, initial_epsilon=2.3, quoted_epsilon=0.6, policy=pol)
    assert ok.passed and ok.reason == "published"
    assert not quality_gate(math.nan, initial_epsilon=2.3, quoted_epsilon=None, policy=pol).passed
    assert not quality_gate(
        0.7, initial_epsilon=2.3, quoted_epsilon=None, policy=pol, finite_weights=False
    ).passed
    assert quality_gate(4.5, initial_epsilon=2.3, quoted_epsilon=None, policy=pol).passed
    worse = quality_gate(4.7, initial_epsilon=2.3, quoted_epsilon=None, policy=pol)
    assert not worse.passed and "untrained" in worse.reason
    far = quality_gate(1.3, initial_epsilon=2.3, quoted_epsilon=0.6, policy=pol)
    assert not far.passed and "quoted" in far.reason


def test_policy_rejects_bad_values() -> None:
    """The policy names the field when a value is out of range."""
    with pytest.raises(ValueError, match="trim_fraction"):
        VerificationPolicy(trim_fraction=0.5)
    with pytest.raises(ValueError, match="min_share"):
        VerificationPolicy(min_share=0.0)


@pytest.mark.slow
def test_honest_false_positive_rate_on_real_training(fashion_dir: Path) -> None:
    """Real FedAvg (3 seeds × 12 rounds × 8 honest clients, E = 20 and E = 5): at most 1% of
    honest updates flagged, every free rider, random, scaled and NaN update caught, and most
    label-flipped ones."""
    from benchmarks.integrity.simulate import measure

    for steps in (20, 5):
        out = measure([0, 1, 2], rounds=12, data_dir=fashion_dir, local_steps=steps)
        assert out.honest_updates == 3 * 12 * 8
        assert out.false_positive_rate <= 0.01, out.as_dict()
        for attack in ("free_rider", "random_weights", "scaled_weights", "nan_weights"):
            assert out.attacks[attack]["caught"] == out.attacks[attack]["tried"], attack
        flip = out.attacks["label_flip"]
        assert flip["caught"] >= 0.6 * flip["tried"], out.as_dict()
