"""Fitting Eq. (3) plus the irreducible loss ε0 to measured test losses (Fig. 5's fit).

With S = Σ_i K_i/D_i and K = Σ_i K_i, ε(K) = ε0 + dγ²·S/K² + σ²·(K−1)/K
(:func:`mots.economics.error.error_from_totals`) is linear in (ε0, dγ², σ²) once the coalition is
known; :func:`fit_error_model` solves that least-squares problem with all three ≥ 0 and reports
R². The coalition sweeps (:mod:`mots.training.sweep`) and the paper reproduction fit through it.
The market's types change between rounds (a type added or retired, its D changed), so the
evaluation service's refit after every round uses :func:`fit_error_history`: each measurement
carries its own round's sizes and enters the fit only through its (S, K), which every history has.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class Measured(Protocol):
    """A measurement as an object: the coalition K (per type) and its test loss ε."""

    @property
    def participants(self) -> Sequence[float]:
        """K_i per type."""

    @property
    def epsilon(self) -> float:
        """The measured test loss."""


ErrorPoint = Mapping[str, Any] | tuple[Any, ...] | Measured
"""A measured coalition: ``{"participants": K, "epsilon": ε}``, a tuple ``(K, …, ε)`` (K first,
ε last) or an object with ``participants`` and ``epsilon``."""


@dataclass(frozen=True)
class Fit:
    """Least-squares fit of Eq. (3) plus ε0; ``r2`` is None when the losses do not vary."""

    eps0: float
    d_gamma2: float
    sigma2: float
    r2: float | None
    n_points: int = 0

    def predict(
        self, participants: Sequence[Sequence[int]] | npt.ArrayLike, sizes: Sequence[float]
    ) -> FloatArray:
        """ε predicted by Eq. (3) plus ε0 for each coalition (rows of K)."""
        a = design_matrix(np.atleast_2d(np.asarray(participants, dtype=np.float64)), sizes)
        return np.asarray(a @ np.array([self.eps0, self.d_gamma2, self.sigma2]), dtype=np.float64)

    def as_dict(self) -> dict[str, float | None]:
        """The coefficients and R², as sweep.json's ``fit`` holds them."""
        return {"eps0": self.eps0, "d_gamma2": self.d_gamma2, "sigma2": self.sigma2, "r2": self.r2}


def totals_design(s: FloatArray, total: FloatArray) -> FloatArray:
    """Rows (1, S/K², (K−1)/K) of Eq. (3)'s terms from each coalition's S = Σ_i K_i/D_i and
    K = Σ_i K_i (the only way a coalition enters Eq. 3)."""
    if np.any(total <= 0):
        raise ValueError("points: a coalition with K = 0 has no model and no loss")
    return np.column_stack([np.ones_like(total), s / total**2, (total - 1.0) / total])


def design_matrix(participants: FloatArray, sizes: Sequence[float]) -> FloatArray:
    """Rows (1, S/K², (K−1)/K) of Eq. (3)'s terms, one per coalition (rows of ``participants``)."""
    d = np.asarray(sizes, dtype=np.float64)
    if participants.shape[1] != d.size:
        raise ValueError(f"participants have {participants.shape[1]} types but sizes has {d.size}")
    return totals_design(participants @ (1.0 / d), participants.sum(axis=1))


def history_totals(
    history: Iterable[tuple[Sequence[float], Sequence[float], float]],
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(S, K, ε) per measurement ``(K per type, D per type, ε)``, each with its own round's types:
    their number and sizes may differ from one measurement to the next."""
    rows = list(history)
    if not rows:
        raise ValueError("points: need at least one measured coalition")
    for i, (k, d, _) in enumerate(rows):
        if len(k) != len(d):
            raise ValueError(f"points[{i}]: {len(k)} participant counts but {len(d)} data sizes")
    lengths = np.fromiter((len(k) for k, _, _ in rows), dtype=np.intp, count=len(rows))
    k_flat = np.fromiter((x for k, _, _ in rows for x in k), dtype=np.float64)
    d_flat = np.fromiter((x for _, d, _ in rows for x in d), dtype=np.float64)
    if np.any(d_flat <= 0) or not np.all(np.isfinite(d_flat)):
        raise ValueError("points: every data size D_i must be positive and finite")
    which = np.repeat(np.arange(len(rows)), lengths)
    s = np.bincount(which, weights=k_flat / d_flat, minlength=len(rows)).astype(np.float64)
    total = np.bincount(which, weights=k_flat, minlength=len(rows)).astype(np.float64)
    eps = np.fromiter((float(e) for _, _, e in rows), dtype=np.float64, count=len(rows))
    return s, total, eps


def _read_point(point: ErrorPoint) -> tuple[list[float], float]:
    if isinstance(point, Mapping):
        k, y = point["participants"], point["epsilon"]
    elif isinstance(point, tuple):
        k, y = point[0], point[-1]
    else:
        k, y = point.participants, point.epsilon
    return [float(x) for x in k], float(y)


def _as_arrays(points: Iterable[ErrorPoint]) -> tuple[FloatArray, FloatArray]:
    pairs = [_read_point(p) for p in points]
    if not pairs:
        raise ValueError("points: need at least one measured coalition")
    if len({len(k) for k, _ in pairs}) > 1:
        raise ValueError("points: coalitions over different types; use fit_error_history")
    ks = np.asarray([k for k, _ in pairs], dtype=np.float64)
    ys = np.asarray([y for _, y in pairs], dtype=np.float64)
    return ks, ys


def fit_error_model(points: Iterable[ErrorPoint], sizes: Sequence[float]) -> Fit:
    """Non-negative least squares of ε on (1, S/K², (K−1)/K) (Eq. 3 plus ε0), every coalition
    over the same types ``sizes`` (:func:`fit_error_history` when the types differ)."""
    k, y = _as_arrays(points)
    return _nonnegative_fit(design_matrix(k, sizes), y)


def fit_error_history(history: Iterable[tuple[Sequence[float], Sequence[float], float]]) -> Fit:
    """:func:`fit_error_model` over measurements ``(K per type, D per type, ε)`` each with its
    own round's types (added, retired or resized between rounds): Eq. (3) through (S, K)."""
    s, total, y = history_totals(history)
    return _nonnegative_fit(totals_design(s, total), y)


def _nonnegative_fit(a: FloatArray, y: FloatArray) -> Fit:
    """Every subset of the three coefficients is fitted by ordinary least squares; the feasible
    (all ≥ 0) fit with the least squared error wins, which is the non-negative optimum of this
    three-column problem."""
    if not np.all(np.isfinite(y)):
        raise ValueError("points: every epsilon must be finite")
    best: tuple[float, FloatArray] | None = None
    for r in range(1, 4):
        for cols in itertools.combinations(range(3), r):
            coef, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
            if np.any(coef < 0):
                continue
            full = np.zeros(3)
            full[list(cols)] = coef
            sse = float(np.sum((a @ full - y) ** 2))
            if best is None or sse < best[0] - 1e-15:
                best = (sse, full)
    if best is None:  # only possible with all-negative losses
        best = (float(np.sum(y**2)), np.zeros(3))
    sse, coef = best
    sst = float(np.sum((y - y.mean()) ** 2))
    r2 = None if sst <= 0.0 or len(y) < 2 else 1.0 - sse / sst
    return Fit(float(coef[0]), float(coef[1]), float(coef[2]), r2, len(y))
