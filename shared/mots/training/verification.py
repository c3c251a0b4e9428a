"""Verifying participants' updates before they count (pure: numpy in, verdicts out).

A participant is paid r_i for training at cost C_i; if an update that did no work counted like
one that did, skipping the work would be every participant's best response. Before FedAvg
aggregates a round, each update Δ_i = w_i − w (w the global model sent) passes, in order:

1. ``shape``: the same layers, shapes and a floating dtype as the global model;
2. ``finite``: no NaN or ±∞;
3. ``reported``: the reported ``num_examples`` equals the declared data size D_i and the reported
   ``samples`` equals E·b (the work the round asked for): a self-report, cheap to forge, but it
   refuses a node that admits it holds or used less than it declared; ``duplicate``: within
   ``copy_distance`` of another's update of the round, both withheld (:mod:`mots.training.copies`);
4. ``free_riding``: ‖Δ_i‖ above ``min_norm_ratio`` × the scale s: the E SGD steps of b draws
   the round asked for move the model about as far as the server's own E steps (an honest
   update's norm was at least 0.57 s in the measurements of docs/training.md); below, the node
   returned the model it was sent, or did a small part of the work (one step of 20). For an
   update the server holds references for its declared D (``anchored``), the bound scales by
   √(D / ``work_ratio_size``) below that size, as too_little_work's does (:func:`free_riding_bound`);
5. ``norm``: ‖Δ_i‖ ≤ ``max_norm_ratio`` × s (scaled or random weights);
6. ``direction``: cos(Δ_i, Δ_ref) ≥ ``min_cosine``, Δ_ref the server's own update of w on its
   anchor split (FLTrust's root update, Cao et al., NDSS 2021), and, with ≥ ``min_peers`` updates,
   cos(Δ_i, median_j Δ_j) ≥ ``min_peer_cosine`` (the coordinate-wise median of the round's
   updates, a robust centre that a minority cannot drag);
7. ``harmful``: the validation loss (a split the server holds, apart from the test set that
   measures ε) of w + Δ_i exceeds (1 + ``loss_tolerance``) × max(L(w), L(w + Δ_ref), and
   L(w + Δ_t) of the server's further ``reference_draws`` − 1 honest updates on other
   mini-batches) + ``loss_tolerance_abs`` (``harm_check="reference"``; ``own`` compares with
   L(w) only, ``leave_one_out`` the mean of the round with and without Δ_i). From a young model
   at η0 = 0.5 an honest update's validation loss varies several-fold from draw to draw; the
   worst of several honest draws bounds it where one draw did not (one draw flagged 2-5% of
   honest round-1 updates, among them the README journey's pi-1).

With the server's anchored references (``anchored``), four more checks judge each update
against updates the server trained itself on D_i of its own samples, never against the peers
(:mod:`mots.training.anchored`): ``stale`` (a replay of an earlier update or model),
``off_data`` (trained on inputs unlike the declared data, or diluted with noise),
``too_little_work`` (fewer steps than asked), ``rescaled`` (fewer steps than asked, stretched to
an honest norm) and, given ``validation_accuracy``, ``accuracy``
(its model's validation accuracy below what the server's own draws reach: trained toward other
labels, a label flip). With an anchor, the peers' median of check 6 is not
used: a majority of attackers would steer it.

The scale s is ‖Δ_ref‖ when the server has an anchor split, else the median of the round's
update norms (with fewer than ``min_peers`` updates and no anchor, checks 4–6 are skipped).
Checks 1–6 are statistics of the arrays; 7 needs the server's loss, passed in as a function.
What this can and cannot catch is in docs/training.md (trust model).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from mots.training.anchored import AnchorTolerance, References, judge, size_allowance
from mots.training.copies import copied

FloatArray = npt.NDArray[np.floating]
Weights = Sequence[npt.NDArray[np.generic]]
LossFn = Callable[[list[npt.NDArray[np.float32]]], float]

AggregatorName = Literal["mean", "trimmed_mean", "median"]
CHECKS = (
    "shape",
    "finite",
    "reported",
    "duplicate",
    "free_riding",
    "norm",
    "direction",
    "stale",
    "off_data",
    "too_little_work",
    "rescaled",
    "accuracy",
    "harmful",
)


class VerificationPolicy(BaseModel):
    """What an update must satisfy to count, how the verified ones are aggregated, and the
    drop-out and quality rules of a training run (one per deployment: ``MOTS_TRAIN_POLICY``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    verify: bool = Field(True, description="off only to measure what verification costs")
    aggregator: AggregatorName = Field(
        "mean", description="mean (FedAvg, Eq. 2/3), trimmed_mean or median (coordinate-wise)"
    )
    trim_fraction: float = Field(0.2, ge=0.0, lt=0.5, description="trimmed_mean: cut per side")
    min_norm_ratio: float = Field(
        0.35,
        ge=0.0,
        description="‖Δ_i‖/s below: too little work (free riding; E steps of b draws move the "
        "model about as far as the server's own E steps)",
    )
    max_norm_ratio: float = Field(4.0, gt=1.0, description="‖Δ_i‖/s above: refused")
    min_cosine: float = Field(-0.5, ge=-1.0, le=1.0, description="cos(Δ_i, Δ_ref) below: refused")
    min_peer_cosine: float = Field(
        -0.3, ge=-1.0, le=1.0, description="cos to the peers median: floor"
    )
    outlier_z: float = Field(
        4.0, gt=0.0, description="robust z-score below the peers' cosines that is an outlier"
    )
    outlier_floor: float = Field(
        0.1, gt=0.0, description="least spread (robust σ) the outlier test assumes"
    )
    min_peers: int = Field(5, ge=3, description="peer statistics need this many updates")
    harm_check: Literal["reference", "own", "leave_one_out", "off"] = Field(
        "reference",
        description="validation loss of each model against the sent model and the server's own "
        "update of it (reference), the sent model only (own), or the mean without it",
    )
    loss_tolerance: float = Field(1.0, ge=0.0, description="relative validation-loss rise")
    reference_draws: int = Field(
        8,
        ge=1,
        description="harm check (reference): the server's honest updates of w on other anchor "
        "mini-batches whose worst validation loss bounds an honest overshoot (1: Δ_ref alone)",
    )
    loss_tolerance_abs: float = Field(0.0, ge=0.0, description="absolute validation-loss rise")
    check_reported: bool = Field(True, description="reported num_examples/samples must match")
    copy_distance: float = Field(
        0.2, ge=0.0, description="duplicate: ‖Δ_i − Δ_j‖ ≤ this × the larger norm, both withheld"
    )
    min_share: float = Field(
        0.5, gt=0.0, le=1.0, description="share of the chosen participants that must remain"
    )
    round_timeout_s: float = Field(300.0, gt=0.0, description="a FedAvg round's reply deadline")
    straggler_factor: float = Field(
        3.0, ge=1.0, description="once a min_share quorum replied after t s, wait factor·t in all"
    )
    straggler_grace_s: float = Field(
        10.0, ge=0.0, description="…and at least this long after the quorum"
    )
    quality_factor: float = Field(
        2.0, gt=1.0, description="refuse to publish when ε exceeds this × the quoted ε"
    )
    holdout: int = Field(
        6000, ge=0, description="training samples the server keeps (anchor + validation)"
    )
    anchor_draws: int = Field(
        8,
        ge=0,
        description="anchored checks: the server's own updates per declared size D on D anchor "
        "samples each (0: the anchored checks are off)",
    )
    replay_distance: float = Field(
        0.05, ge=0.0, description="stale: within this × ‖Δ‖ of an earlier update or model"
    )
    off_data_margin: float = Field(
        0.10,
        ge=0.0,
        description="off_data: the first layer's energy share outside the real inputs' span "
        "above the server's draws' largest by more than this",
    )
    min_work_ratio: float = Field(
        0.45, ge=0.0, description="too_little_work: ‖Δ‖ below this × the server's draws' median"
    )
    work_ratio_size: float = Field(
        160.0,
        ge=0.0,
        description="too_little_work: below this declared D the bound is min_work_ratio × "
        "√(D / this) (own samples already fit by the model; 0: not scaled)",
    )
    fresh_work_ratio: float = Field(
        0.70,
        ge=0.0,
        description="too_little_work in round 0 (the model carries no participant's data): the "
        "update's norm over the draws' median × the draws' median top-direction share of the "
        "first layer over the update's, below this (0: off)",
    )
    accuracy_spread: float = Field(
        0.5,
        ge=0.0,
        description="accuracy: validation accuracy below the server's draws' worst less this × "
        "their spread (median − worst)…",
    )
    accuracy_margin: float = Field(0.20, ge=0.0, description="…and less this (absolute accuracy)")
    min_spread_ratio: float = Field(
        0.35,
        ge=0.0,
        description="rescaled: the first layer's effective directions (participation ratio of "
        "its singular values) below this × the server's draws' median (0: off). 0.35 is below "
        "every honest update measured (0 of 2,232 over 12 rounds, the least 0.365; 0.5 flagged "
        "0.3%) and catches a share of the rescaled E/4 shirkers; docs/training.md",
    )


@dataclass(frozen=True)
class Candidate:
    """One participant's reply in a round: its model and what it reported."""

    key: int
    weights: Weights
    num_examples: float
    samples: float
    declared_size: int


@dataclass(frozen=True)
class Verdict:
    """Whether a participant's update counts, and why not (the first check it failed)."""

    key: int
    accepted: bool
    check: str | None = None
    detail: str = ""
    stats: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundVerification:
    """A round's verdicts (in candidate order) and the scale the norms were measured against."""

    verdicts: list[Verdict]
    scale: float
    reference_norm: float | None

    @property
    def accepted(self) -> list[int]:
        """Keys of the accepted candidates."""
        return [v.key for v in self.verdicts if v.accepted]

    @property
    def rejected(self) -> dict[int, Verdict]:
        """Rejected candidates by key."""
        return {v.key: v for v in self.verdicts if not v.accepted}


def flatten(weights: Weights) -> npt.NDArray[np.float64]:
    """All layers as one float64 vector."""
    if len(weights) == 0:
        return np.zeros(0)
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in weights])


def cosine(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """cos(a, b); 0 when either is the zero vector."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def shape_problem(weights: Weights, reference: Weights) -> str | None:
    """Why ``weights`` does not fit the global model's layers, or None."""
    if len(weights) != len(reference):
        return f"{len(weights)} layers, expected {len(reference)}"
    for n, (w, r) in enumerate(zip(weights, reference, strict=True)):
        arr = np.asarray(w)
        if arr.shape != np.shape(r):
            return f"layer {n} has shape {arr.shape}, expected {np.shape(r)}"
        if not np.issubdtype(arr.dtype, np.floating):
            return f"layer {n} has dtype {arr.dtype}, expected a floating type"
    return None


def _reported_problem(c: Candidate, expected_samples: int | None) -> str | None:
    if not math.isfinite(c.num_examples) or int(c.num_examples) != c.declared_size:
        return f"reported num_examples {c.num_examples!r} differs from the declared D = {c.declared_size}"
    if expected_samples is not None and (
        not math.isfinite(c.samples) or int(c.samples) != expected_samples
    ):
        return f"reported {c.samples!r} samples drawn, the round asked for E·b = {expected_samples}"
    return None


def robust_low(values: Sequence[float], z: float, floor: float) -> float:
    """The outlier bound median − z·max(1.4826·MAD, floor) of ``values`` (a robust z-score)."""
    v = np.asarray(values, dtype=np.float64)
    med = float(np.median(v))
    mad = float(np.median(np.abs(v - med)))
    return med - z * max(1.4826 * mad, floor)


def _scale(norms: Mapping[int, float], ref_norm: float, peers: bool) -> float:
    if ref_norm > 0.0:
        return ref_norm
    if peers:
        return float(np.median(list(norms.values())))
    return 0.0


def free_riding_bound(policy: VerificationPolicy, anchored_size: int | None = None) -> float:
    """The least ‖Δ_i‖/s of check 4: ``min_norm_ratio``; for an update whose declared size D the
    server holds references for (``anchored_size``), scaled like too_little_work's floor,
    √(D / ``work_ratio_size``) below that size: s is the server's step on an anchor split the
    model never fit, while a small participant's own samples are fit within a few rounds (an
    honest breast-cancer hospital, D 30, moved 0.346 s), and the size-matched check backs it."""
    if anchored_size is None:
        return policy.min_norm_ratio
    return policy.min_norm_ratio * size_allowance(anchored_size, policy.work_ratio_size)


def _statistical(
    deltas: Mapping[int, npt.NDArray[np.float64]],
    reference: npt.NDArray[np.float64] | None,
    policy: VerificationPolicy,
    anchored_sizes: Mapping[int, int] | None = None,
) -> tuple[dict[int, tuple[str, str]], dict[int, dict[str, float]], float]:
    """Checks 4–6 on the finite, well-shaped deltas: (failures, stats, scale). The peers'
    centre and cosine bound come from the updates whose norm passed; ``anchored_sizes`` gives
    the declared size of each update the server holds references for (:func:`free_riding_bound`)."""
    norms = {k: float(np.linalg.norm(d)) for k, d in deltas.items()}
    ref_norm = float(np.linalg.norm(reference)) if reference is not None else 0.0
    scale = _scale(norms, ref_norm, len(deltas) >= policy.min_peers)
    stats: dict[int, dict[str, float]] = {
        k: {"norm": norms[k], "norm_ratio": norms[k] / scale if scale else 0.0} for k in deltas
    }
    failed: dict[int, tuple[str, str]] = {}
    if scale <= 0.0:
        return failed, stats, scale
    for k, s in stats.items():
        bound = free_riding_bound(policy, (anchored_sizes or {}).get(k))
        if s["norm_ratio"] < bound:
            failed[k] = (
                "free_riding",
                f"‖Δ‖ = {s['norm']:.3g} is {s['norm_ratio']:.3f} of the scale {scale:.3g} "
                f"(< {bound:.3g}): the update barely moved the model it was sent",
            )
        elif s["norm_ratio"] > policy.max_norm_ratio:
            failed[k] = (
                "norm",
                f"‖Δ‖ = {s['norm']:.3g} is {s['norm_ratio']:.2f} × the scale {scale:.3g} "
                f"(> {policy.max_norm_ratio})",
            )
    kept = {k: d for k, d in deltas.items() if k not in failed}
    if reference is not None and ref_norm > 0.0:
        for k, d in kept.items():
            stats[k]["cos_ref"] = cosine(d, reference)
    peer_low = -math.inf
    # the peers' median is only a fallback: with the server's own reference, a majority of
    # attackers must not move any verdict (issue 24)
    if reference is None and len(kept) >= policy.min_peers:
        centre = np.median(np.stack(list(kept.values())), axis=0)
        for k, d in kept.items():
            stats[k]["cos_peers"] = cosine(d, centre)
        peer_low = max(
            policy.min_peer_cosine,
            robust_low(
                [stats[k]["cos_peers"] for k in kept], policy.outlier_z, policy.outlier_floor
            ),
        )
    for k in kept:
        s = stats[k]
        if s.get("cos_ref", 1.0) < policy.min_cosine:
            failed[k] = (
                "direction",
                f"cos(Δ, server update) = {s['cos_ref']:.3f} < {policy.min_cosine}",
            )
        elif s.get("cos_peers", 1.0) < peer_low:
            failed[k] = (
                "direction",
                f"cos(Δ, peers' median) = {s['cos_peers']:.3f}, below the peers' bound "
                f"{peer_low:.3f} (robust z {policy.outlier_z})",
            )
    return failed, stats, scale


def _anchored(
    deltas: Mapping[int, npt.NDArray[np.float64]],
    sizes: Mapping[int, int],
    g: npt.NDArray[np.float64],
    anchored: Mapping[int, References],
    history: Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]],
    policy: VerificationPolicy,
    accuracy: Callable[[int], float] | None = None,
) -> tuple[dict[int, tuple[str, str]], dict[int, dict[str, float]]]:
    """Checks stale, off_data, too_little_work and accuracy (:mod:`mots.training.anchored`) of
    each update against the server's references for its declared size (none there: skipped);
    ``accuracy`` gives a candidate's validation accuracy by key."""
    tol = AnchorTolerance(
        policy.replay_distance,
        policy.off_data_margin,
        policy.min_work_ratio,
        policy.accuracy_spread,
        policy.accuracy_margin,
        work_size=policy.work_ratio_size,
        fresh_work_ratio=policy.fresh_work_ratio,
        spread_ratio=policy.min_spread_ratio,
    )
    failed: dict[int, tuple[str, str]] = {}
    stats: dict[int, dict[str, float]] = {}
    for k, d in deltas.items():
        refs = anchored.get(sizes[k])
        if refs is None:
            continue
        acc = accuracy(k) if accuracy is not None and refs.accuracies is not None else None
        v = judge(d, g, refs, history, tol, acc)
        stats[k] = v.stats
        if v.check is not None:
            failed[k] = (v.check, v.detail)
    return failed, stats


def _merge(
    failed: dict[int, tuple[str, str]],
    stats: dict[int, dict[str, float]],
    more_failed: Mapping[int, tuple[str, str]],
    more_stats: Mapping[int, dict[str, float]],
) -> None:
    """Add a later check's failures (an earlier failure stays the verdict) and numbers."""
    for k, why in more_failed.items():
        failed.setdefault(k, why)
    for k, st in more_stats.items():
        stats[k].update(st)


def _harmful(
    models: Mapping[int, list[npt.NDArray[np.float32]]],
    weights: Mapping[int, float],
    global_weights: list[npt.NDArray[np.float32]],
    loss: LossFn,
    policy: VerificationPolicy,
    reference_update: Weights | None,
    reference_losses: Sequence[float] = (),
) -> tuple[dict[int, tuple[str, str]], dict[int, dict[str, float]]]:
    """Check 7 on the validation loss. ``reference`` compares each participant's model with the
    worse of the model it was sent and the server's own update of it (an honest update of a young
    model at a high learning rate overshoots; the server's, made the same way, overshoots
    alike); ``own`` with the sent model only; ``leave_one_out`` the weighted mean with and
    without the participant."""
    from mots.training.fedavg import aggregate

    failed: dict[int, tuple[str, str]] = {}
    stats: dict[int, dict[str, float]] = {}
    keys = list(models)
    if not keys or policy.harm_check == "off":
        return failed, stats

    def mean_of(ks: list[int]) -> list[npt.NDArray[np.float32]]:
        w = np.array([weights[k] for k in ks], dtype=np.float64)
        return aggregate([models[k] for k in ks], w / w.sum())

    base = loss(global_weights)
    if policy.harm_check == "reference" and reference_update is not None:
        ref_model = [
            (np.asarray(g, dtype=np.float32) + np.asarray(d, dtype=np.float32))
            for g, d in zip(global_weights, reference_update, strict=True)
        ]
        base = max(base, loss(ref_model), *reference_losses)
    with_all = loss(mean_of(keys)) if policy.harm_check == "leave_one_out" else math.nan
    for k in keys:
        if policy.harm_check in ("own", "reference"):
            with_k, without = loss(models[k]), base
        else:
            rest = [j for j in keys if j != k]
            with_k, without = with_all, (loss(mean_of(rest)) if rest else base)
        stats[k] = {"val_loss": with_k, "val_loss_without": without}
        bound = (1.0 + policy.loss_tolerance) * without + policy.loss_tolerance_abs
        if not math.isfinite(with_k) or with_k > bound:
            what = "the mean with it" if policy.harm_check == "leave_one_out" else "its model"
            failed[k] = (
                "harmful",
                f"validation loss of {what} {with_k:.4f} > {bound:.4f} "
                f"((1 + {policy.loss_tolerance}) × {without:.4f} + {policy.loss_tolerance_abs})",
            )
    return failed, stats


def _screen(
    candidates: Sequence[Candidate],
    global_weights: list[npt.NDArray[np.float32]],
    g: npt.NDArray[np.float64],
    policy: VerificationPolicy,
    expected_samples: int | None,
) -> tuple[dict[int, Verdict], dict[int, npt.NDArray[np.float64]]]:
    """Checks 1-3 (shape, finite, reported), which need no other update: the refusals as
    verdicts, and the flattened update Δ_i = w_i − w of every candidate that passed them."""
    verdicts: dict[int, Verdict] = {}
    deltas: dict[int, npt.NDArray[np.float64]] = {}
    for c in candidates:
        problem = shape_problem(c.weights, global_weights)
        if problem is not None:
            verdicts[c.key] = Verdict(c.key, False, "shape", problem)
            continue
        flat = flatten(c.weights)
        if not np.all(np.isfinite(flat)):
            bad = int(np.size(flat) - np.count_nonzero(np.isfinite(flat)))
            verdicts[c.key] = Verdict(c.key, False, "finite", f"{bad} non-finite values")
            continue
        if policy.check_reported:
            problem = _reported_problem(c, expected_samples)
            if problem is not None:
                verdicts[c.key] = Verdict(c.key, False, "reported", problem)
                continue
        deltas[c.key] = flat - g
    return verdicts, deltas


def _accuracy_by_key(
    candidates: Sequence[Candidate], validation_accuracy: LossFn | None
) -> Callable[[int], float] | None:
    """A candidate's validation accuracy by key (None without the server's accuracy)."""
    if validation_accuracy is None:
        return None
    by_key = {c.key: c.weights for c in candidates}
    return lambda k: validation_accuracy([np.asarray(a, dtype=np.float32) for a in by_key[k]])


def verify_round(
    global_weights: list[npt.NDArray[np.float32]],
    candidates: Sequence[Candidate],
    policy: VerificationPolicy,
    *,
    reference_update: Weights | None = None,
    validation_loss: LossFn | None = None,
    aggregation_weights: Mapping[int, float] | None = None,
    expected_samples: int | None = None,
    reference_losses: Sequence[float] = (),
    anchored: Mapping[int, References] | None = None,
    history: Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = (),
    validation_accuracy: LossFn | None = None,
) -> RoundVerification:
    """Verdicts on a round's candidates (see the module docstring for the checks, in order).

    ``reference_update`` is the server's own Δ_ref on its anchor split (None: peers only);
    ``validation_loss`` maps weights to the server's validation loss (None: check 7 skipped);
    ``aggregation_weights`` weigh the leave-one-out means (default uniform);
    ``reference_losses`` are the validation losses of the server's further honest updates
    (:meth:`~mots.training.holdout.Holdout.reference_losses`), raising the harm check's base;
    ``anchored`` maps a declared data size to the server's references for it
    (:meth:`~mots.training.holdout.Holdout.anchored_references`) and ``history`` holds the
    earlier rounds' (model, update) pairs, flattened: the checks stale, off_data and
    too_little_work (:mod:`mots.training.anchored`); ``validation_accuracy`` maps weights to the
    server's validation accuracy, for the accuracy check against references that carry theirs.
    """
    g = flatten(global_weights)
    verdicts, deltas = _screen(candidates, global_weights, g, policy, expected_samples)
    reference = None if reference_update is None else flatten(reference_update)
    sizes = {c.key: c.declared_size for c in candidates}
    sized = {k: d for k, d in sizes.items() if anchored and d in anchored}
    failed, stats, scale = _statistical(deltas, reference, policy, sized)
    copies, copy_stats = copied(deltas, policy.copy_distance)
    _merge(failed, stats, {}, copy_stats)
    failed.update(copies)  # checked before the statistics: a copy's verdict is ``duplicate``
    if anchored:
        acc = _accuracy_by_key(candidates, validation_accuracy)
        _merge(failed, stats, *_anchored(deltas, sizes, g, anchored, history, policy, acc))
    # the per-model harm checks also measure the updates already refused (reported in stats);
    # leave-one-out is a property of the set, so only the survivors take part in it
    loo = policy.harm_check == "leave_one_out"
    measured = {
        c.key: [np.asarray(a, dtype=np.float32) for a in c.weights]
        for c in candidates
        if c.key in deltas and not (loo and c.key in failed)
    }
    if validation_loss is not None:
        w = aggregation_weights or {}
        harm, harm_stats = _harmful(
            measured,
            {k: w.get(k, 1.0) for k in measured},
            global_weights,
            validation_loss,
            policy,
            reference_update,
            reference_losses,
        )
        _merge(failed, stats, harm, harm_stats)
    for k in deltas:
        if k in failed:
            verdicts[k] = Verdict(k, False, failed[k][0], failed[k][1], stats[k])
        else:
            verdicts[k] = Verdict(k, True, None, "", stats[k])
    ref_norm = None if reference is None else float(np.linalg.norm(reference))
    return RoundVerification([verdicts[c.key] for c in candidates], scale, ref_norm)


def accept_all(candidates: Sequence[Candidate]) -> RoundVerification:
    """Every candidate accepted unchecked (``verify=False``: only to measure what checking costs)."""
    return RoundVerification([Verdict(c.key, True) for c in candidates], 0.0, None)
