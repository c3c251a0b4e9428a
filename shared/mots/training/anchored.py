"""Judging an update against what the server computed itself, never against the peers.

The peers' statistics (their median update, their spread) are what attackers control once they
are the majority of a round. This module compares one participant's update Δ_i = w_i − w only
with references the platform produces from its own holdout and the round's global model w
(:meth:`mots.training.holdout.Holdout.anchored_references`):

- ``deltas``: T updates of w that the server trains itself, each on D_i samples of its anchor
  split (D_i the participant's declared data size, disjoint draws where the anchor allows), with
  the round's E steps of b draws at η0/(1+r): the distribution of an honest update of this
  participant's type in this round;
- ``basis``: orthonormal rows spanning most of the energy of the real inputs (the top singular
  vectors of the validation split's images): the first layer of an honest update is a sum of
  δ·xᵀ over the inputs x it trained on, so its rows lie close to that span.

Checks, in order (the first failure is the verdict):

1. ``stale``: Δ_i or w_i is within ``replay_distance`` × ‖Δ_i‖ of an update or model sent in an
   earlier round (by anyone): a replay. Honest updates of consecutive rounds were ≥ 0.19 ‖Δ‖
   apart in the measurements of docs/training.md; a replay is 0 apart.
2. ``off_data``: the share of the first layer's ‖ΔW‖² outside the span of the real inputs
   exceeds the largest share among the server's T reference draws by more than
   ``off_data_margin``: trained on inputs unlike the declared data (random images) or diluted
   with noise (isotropic noise puts most of its energy outside the span).
3. ``too_little_work``: ‖Δ_i‖ below ``min_work_ratio`` × √(min(1, D_i / ``work_size``)) × the
   median norm of the T references: fewer of the E steps than asked (norms grow with the steps
   taken). The factor is the size-aware part: the draws train on D_i *fresh* anchor samples, but
   after round 0 the global model already carries the participant's earlier updates on its own
   D_i samples (its FedAvg share of them), so its honest update is smaller than the draws', the
   more so the fewer its samples (E·b/D_i local epochs a round). Measured in docs/training.md
   (``benchmarks/integrity/work_ratio.py``): honest D = 50 participants holding a third of the
   average fell to 0.252 of the draws' median by round 7, D = 120 to 0.416, D = 300 to 0.604;
   with ``work_size`` = 160 the bound is 0.2516, 0.39 and 0.45 there (no margin left at D = 50
   by round 7: longer runs need a larger ``work_size``). In round 0 (``References.fresh``: the
   model carries no participant's data, so the draws are the honest update's distribution
   itself) the update also fails when (‖Δ_i‖ / median_t ‖Δ_t‖) × (median_t s_t / s_i) <
   ``fresh_work_ratio``, s the first layer's top-direction share σ1/‖W‖_F: few steps give an
   update both smaller and more one-directional. Measured in docs/training.md (22 seeds, D = 50,
   120, 300): honest at least 0.70 (participants 0.78), E/4 of the steps at most 0.70 (D = 50).
4. ``rescaled``: the first layer's effective number of directions, the participation ratio
   (Σσ²)² / Σσ⁴ of its singular values, below ``spread_ratio`` × the draws' median: E SGD steps
   on fresh mini-batches spread an update over more directions than E/4 of them do, and
   rescaling an E/4 update to an honest norm (which passes check 3) does not change its
   directions. Measured in docs/training.md ("Copies and shirking"): a probabilistic check (it
   catches a share of the rescaled E/4 updates, never an honest one in the measurements), which
   the participation bond of :mod:`mots.economics.bond` completes.
5. ``accuracy``: the validation accuracy of w + Δ_i (the server's validation split) below
   min_t a_t − ``accuracy_spread`` × (median_t a_t − min_t a_t) − ``accuracy_margin``, a_t the
   accuracy of w + Δ_t for the T references: the update moves the model toward other labels than
   the data's (a label flip). The bound is the references' own worst draw widened by their own
   spread, so it follows each round's model and the declared D_i.

Every bound is a statistic of the server's own draws, so the verdict on an update is the same
whoever else is in the round (a majority of attackers included). Pure: numpy in, verdicts out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

Flat = npt.NDArray[np.float64]


@dataclass(frozen=True)
class AnchorTolerance:
    """The bounds of the anchored checks (see the module docstring; measured in docs/training.md)."""

    replay_distance: float = 0.05
    off_data_margin: float = 0.10
    min_work_ratio: float = 0.45
    accuracy_spread: float = 0.5
    accuracy_margin: float = 0.20
    work_size: float = 160.0
    fresh_work_ratio: float = 0.70
    spread_ratio: float = 0.5


def size_allowance(size: int, work_size: float) -> float:
    """√(D / ``work_size``) below ``work_size`` samples, else 1 (and 1 for an unknown D ≤ 0 or
    ``work_size`` 0): how far an honest update's norm falls once a participant's own D samples
    are fit by the model, the allowance of too_little_work's floor and of the free-riding bound
    (:func:`mots.training.verification.free_riding_bound`)."""
    if size <= 0 or work_size <= 0:
        return 1.0
    return math.sqrt(min(1.0, size / work_size))


@dataclass(frozen=True)
class References:
    """The server's own references for one declared data size in one round.

    ``deltas`` (T, P): the server's updates of the global model, flattened like the participants';
    ``basis`` (k, n): orthonormal rows spanning the real inputs of the first layer, whose weights
    are the ``first_layer`` slice of a flattened update viewed as (rows, n); None skips off_data."""

    deltas: Flat
    basis: Flat | None = None
    first_layer: tuple[int, int, int] | None = None
    """(offset, rows, n) of the first layer's weights in a flattened update."""
    accuracies: Flat | None = None
    """(T,) validation accuracy of w + Δ_t for each reference (None: the accuracy check is off)."""
    size: int = 0
    """D_i, the declared data size the draws were made for (0: unknown, the floor not scaled)."""
    fresh: bool = False
    """True when the global model carries no participant's data yet (round 0 of a run from w0)
    and the clients' data are i.i.d. like the anchor's: the draws are then the honest update's
    distribution itself, and ``fresh_work`` applies (under label skew they are not)."""
    iid: bool = True
    """The clients' data are i.i.d. like the anchor's, so the draws' spread is an honest
    update's: ``rescaled`` applies (under label skew a participant holding one class updates
    along fewer directions than the draws, honestly)."""

    def work_floor(self, tol: AnchorTolerance) -> float:
        """The least work ratio ‖Δ_i‖ / median_t ‖Δ_t‖ of an honest update: ``min_work_ratio``,
        scaled by :func:`size_allowance` (see the module docstring)."""
        return tol.min_work_ratio * size_allowance(self.size, tol.work_size)

    def accuracy_floor(self, tol: AnchorTolerance) -> float | None:
        """The least validation accuracy an honest update reaches (None when not measured)."""
        if self.accuracies is None or self.accuracies.size == 0:
            return None
        worst = float(np.min(self.accuracies))
        spread = float(np.median(self.accuracies)) - worst
        return worst - tol.accuracy_spread * spread - tol.accuracy_margin

    def off_share(self, delta: Flat) -> float:
        """Share of the first layer's ‖ΔW‖² outside the span of ``basis`` (0 when unknown)."""
        if self.basis is None or self.first_layer is None:
            return 0.0
        off, rows, n = self.first_layer
        w = delta[off : off + rows * n].reshape(rows, n)
        total = float(np.sum(w * w))
        if total <= 0.0:
            return 0.0
        inside = float(np.sum((w @ self.basis.T) ** 2))
        return max(0.0, 1.0 - inside / total)

    def top_share(self, delta: Flat) -> float | None:
        """σ1 / ‖W‖_F of the first layer's update W (None when the first layer is unknown or 0):
        how much of it lies along one direction. Few SGD steps from w move the first layer mostly
        along the mean gradient's direction; more steps spread it over more (measured in
        docs/training.md: at E/4 of E = 20 steps 1.1–1.7 × the draws' median share in round 0)."""
        if self.first_layer is None:
            return None
        off, rows, n = self.first_layer
        w = delta[off : off + rows * n].reshape(rows, n)
        total = float(np.linalg.norm(w))
        if total <= 0.0:
            return None
        return float(np.linalg.norm(w, ord=2)) / total

    def fresh_work(self, delta: Flat) -> float | None:
        """The round-0 work statistic (‖Δ‖ / median_t ‖Δ_t‖) × (median_t s_t / s(Δ)), s the
        first layer's :meth:`top_share`: fewer steps give a smaller and a more one-directional
        update, so both factors fall. None when the first layer is unknown (the CNN)."""
        s = self.top_share(delta)
        ref = self._median_top_share
        median = self._median_norm
        if s is None or ref is None or median is None or median <= 0.0:
            return None
        return float(np.linalg.norm(delta)) / median * ref / s

    def spread(self, delta: Flat) -> float | None:
        """The first layer's participation ratio (Σσ²)² / Σσ⁴ over the singular values σ of its
        update W: how many directions it effectively spans (1: one direction; at most its rows).
        E SGD steps on fresh mini-batches keep adding directions; E/4 of them, scaled up to an
        honest norm, keep the few the first gradients had (None: no first layer, or W = 0)."""
        if self.first_layer is None:
            return None
        off, rows, n = self.first_layer
        sv = np.linalg.svd(delta[off : off + rows * n].reshape(rows, n), compute_uv=False)
        fourth = float(np.sum(sv**4))
        if fourth <= 0.0:
            return None
        return float(np.sum(sv**2)) ** 2 / fourth

    @cached_property
    def median_spread(self) -> float | None:
        """median_t of :meth:`spread` over the draws, computed once per round and size."""
        values = [self.spread(d) for d in self.deltas]
        if not values or any(v is None for v in values):
            return None
        return float(np.median([v for v in values if v is not None]))

    @cached_property
    def _median_top_share(self) -> float | None:
        """median_t s_t over the draws, computed once per round and size (not per participant)."""
        shares = [self.top_share(d) for d in self.deltas]
        if not shares or any(x is None for x in shares):
            return None
        return float(np.median([x for x in shares if x is not None]))

    @cached_property
    def _median_norm(self) -> float | None:
        """median_t ‖Δ_t‖ of the draws (None without draws), computed once."""
        norms = self.reference_norms()
        return float(np.median(norms)) if norms.size else None

    def reference_norms(self) -> Flat:
        """‖Δ_t‖ of each reference draw."""
        return np.asarray(np.linalg.norm(self.deltas, axis=1), dtype=np.float64)


@dataclass(frozen=True)
class AnchoredVerdict:
    """The first anchored check an update failed (None: passed), why, and the measured numbers."""

    check: str | None
    detail: str
    stats: dict[str, float]


def _replayed(
    delta: Flat, weights: Flat, history: Sequence[tuple[Flat, Flat]], tol: float
) -> float | None:
    """The smallest distance (relative to ‖Δ‖) to an earlier (model, update) when within tol."""
    size = float(np.linalg.norm(delta))
    if size <= 0.0 or not history:
        return None
    best = min(
        min(float(np.linalg.norm(weights - w)), float(np.linalg.norm(delta - d)))
        for w, d in history
    )
    return best / size if best <= tol * size else None


def judge(
    delta: Flat,
    global_flat: Flat,
    refs: References,
    history: Sequence[tuple[Flat, Flat]] = (),
    tol: AnchorTolerance | None = None,
    accuracy: float | None = None,
) -> AnchoredVerdict:
    """Anchored verdict on one update Δ (flattened) of the model ``global_flat``, given the
    server's ``refs`` for the participant's declared size, the earlier rounds' (model, update)
    pairs in ``history`` and the validation ``accuracy`` of w + Δ (None: not checked)."""
    t = tol or AnchorTolerance()
    norms = refs.reference_norms()
    median = float(np.median(norms)) if norms.size else 0.0
    size = float(np.linalg.norm(delta))
    ref_off = [refs.off_share(d) for d in refs.deltas]
    stats = {
        "work_ratio": size / median if median > 0.0 else float("nan"),
        "off_share": refs.off_share(delta),
        "off_share_ref_max": max(ref_off) if ref_off else 0.0,
    }
    gap = _replayed(delta, global_flat + delta, history, t.replay_distance)
    if gap is not None:
        stats["replay_distance"] = gap
        return AnchoredVerdict(
            "stale",
            f"the update is {gap:.3g} ‖Δ‖ from one sent in an earlier round "
            f"(≤ {t.replay_distance}): a replay",
            stats,
        )
    if (
        refs.basis is not None
        and stats["off_share"] > stats["off_share_ref_max"] + t.off_data_margin
    ):
        return AnchoredVerdict(
            "off_data",
            f"{stats['off_share']:.3f} of the first layer's update lies outside the span of real "
            f"inputs; the server's own draws on data of the declared kind reach "
            f"{stats['off_share_ref_max']:.3f} (+ {t.off_data_margin} allowed): trained on other "
            "data, or noise added",
            stats,
        )
    fresh = refs.fresh_work(delta) if refs.fresh and t.fresh_work_ratio > 0.0 else None
    if fresh is not None:
        stats["fresh_work"], stats["fresh_work_floor"] = fresh, t.fresh_work_ratio
        if fresh < t.fresh_work_ratio:
            return AnchoredVerdict(
                "too_little_work",
                f"round 0: ‖Δ‖ over the server's draws' median × their median top-direction share "
                f"over Δ's is {fresh:.3f} (< {t.fresh_work_ratio}): a smaller and more "
                "one-directional update than E steps on D fresh samples give, fewer steps than "
                "asked",
                stats,
            )
    stats["work_floor"] = refs.work_floor(t)
    if median > 0.0 and stats["work_ratio"] < stats["work_floor"]:
        return AnchoredVerdict(
            "too_little_work",
            f"‖Δ‖ = {size:.3g} is {stats['work_ratio']:.3f} of the median {median:.3g} of the "
            f"server's own E-step updates on D = {refs.size} samples (< {stats['work_floor']:.3f})"
            ": fewer steps than asked",
            stats,
        )
    verdict = _rescaled(delta, refs, t, stats)
    if verdict is not None:
        return verdict
    floor = refs.accuracy_floor(t)
    if floor is not None and accuracy is not None:
        stats["accuracy"], stats["accuracy_floor"] = accuracy, floor
        if not accuracy >= floor:  # NaN fails
            return AnchoredVerdict(
                "accuracy",
                f"validation accuracy of its model {accuracy:.3f} < {floor:.3f}, the worst of the "
                f"server's own draws less {t.accuracy_spread} × their spread and "
                f"{t.accuracy_margin}: trained toward other labels than the data's",
                stats,
            )
    return AnchoredVerdict(None, "", stats)


def _rescaled(
    delta: Flat, refs: References, t: AnchorTolerance, stats: dict[str, float]
) -> AnchoredVerdict | None:
    """The ``rescaled`` check of :func:`judge` (i.i.d. data, ``spread_ratio`` > 0): Δ's first
    layer spans too few directions for E steps, whatever its norm; None when it passes."""
    spread = refs.spread(delta) if t.spread_ratio > 0.0 and refs.iid else None
    ref_spread = refs.median_spread if spread is not None else None
    if spread is not None and ref_spread is not None and ref_spread > 0.0:
        stats["spread_ratio"], stats["spread_floor"] = spread / ref_spread, t.spread_ratio
        if stats["spread_ratio"] < t.spread_ratio:
            return AnchoredVerdict(
                "rescaled",
                f"the first layer's update spans {spread:.2f} effective directions, "
                f"{stats['spread_ratio']:.3f} of the server's own E-step draws' median "
                f"{ref_spread:.2f} (< {t.spread_ratio}): the few directions of fewer steps than "
                "asked, stretched to an honest size",
                stats,
            )
    return None
