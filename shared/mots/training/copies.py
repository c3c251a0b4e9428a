"""Copied updates within a round: two participants that send the same (or nearly the same) update.

Two accounts run by one owner (a Sybil twin) can train once and send the one update twice, paid
r_i twice for one cost C_i; every per-update check passes both, since each alone is an honest
update. An update reaches only the server (over TLS, :mod:`mots.training.federation`), so two
participants' updates can only coincide when their owners shared it: the server cannot tell the
original from the copy, and **every member of a group of near-duplicates is withheld** (the rule
of docs/training.md, "Copies and shirking"). Honest participants train on disjoint partitions with
their own mini-batch draws, so their updates of the same model differ by about their own size
(docs/training.md: in 100 rounds of 8 honest participants no two came nearer than 0.647 × the
smaller norm; the bound ``copy_distance`` is 0.2 × the larger). Pure: numpy in, verdicts out.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

Flat = npt.NDArray[np.float64]


def nearest_copies(deltas: Mapping[int, Flat]) -> dict[int, tuple[int, float]]:
    """For each update Δ_i (with at least one other), its nearest other update j and the
    relative distance ‖Δ_i − Δ_j‖ / max(‖Δ_i‖, ‖Δ_j‖) (0 for an exact copy; ∞ when both are 0:
    two participants that return the model they were sent are free riders, not copies).

    Dividing by the larger norm also brings a rescaled copy c·Δ close (distance |1 − c| for
    c ≤ 1), so scaling a copy does not hide it. Computed from the Gram matrix, one product."""
    keys = list(deltas)
    if len(keys) < 2:
        return {}
    x = np.stack([np.asarray(deltas[k], dtype=np.float64) for k in keys])
    gram = x @ x.T
    sq = np.diag(gram)
    dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * gram, 0.0))
    scale = np.sqrt(np.maximum(sq[:, None], sq[None, :]))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(scale > 0.0, dist / np.where(scale > 0.0, scale, 1.0), np.inf)
    np.fill_diagonal(rel, np.inf)
    out: dict[int, tuple[int, float]] = {}
    for n, k in enumerate(keys):
        j = int(np.argmin(rel[n]))
        out[k] = (keys[j], float(rel[n, j]))
    return out


def copied(
    deltas: Mapping[int, Flat], copy_distance: float
) -> tuple[dict[int, tuple[str, str]], dict[int, dict[str, float]]]:
    """The ``duplicate`` check: (failures, stats). Every update within ``copy_distance`` of
    another participant's (relative to the larger norm) fails, both of a pair; every update's
    finite nearest relative distance is reported as ``copy_distance`` (how close honest ones
    come)."""
    failed: dict[int, tuple[str, str]] = {}
    stats: dict[int, dict[str, float]] = {}
    for k, (j, rel) in nearest_copies(deltas).items():
        if not np.isfinite(rel):
            continue  # only zero updates around it: nothing to compare (and no ∞ in the JSON)
        stats[k] = {"copy_distance": rel}
        if rel <= copy_distance:
            failed[k] = (
                "duplicate",
                f"the update is {rel:.3g} × its size from participant {j}'s of this round "
                f"(≤ {copy_distance}): one update sent by two participants; both are withheld",
            )
    return failed, stats
