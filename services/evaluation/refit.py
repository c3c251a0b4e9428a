"""Refitting ε0, dγ² and σ² of Eq. (3) to the measured test losses of past rounds.

ε(K) = ε0 + dγ²·S/K² + σ²·(K−1)/K with S = Σ_i K_i/D_i is linear in (ε0, dγ², σ²) once K is
known; the fit itself is the economics core's :func:`mots.economics.error_fit.fit_error_model`.
"""

from __future__ import annotations

from mots.economics.error_fit import fit_error_model
from mots.platform.api.rounds import ErrorFit

Point = tuple[list[int], list[float], float]
"""(K per type, D per type, measured test loss)."""


def refit(points: list[Point], min_points: int) -> ErrorFit | None:
    """The least-squares fit over all points, or None while fewer than ``min_points`` coalitions."""
    distinct = {tuple(k) for k, _, _ in points}
    if len(distinct) < min_points:
        return None

    sizes = points[-1][1]
    fit = fit_error_model([(k, loss) for k, _, loss in points], sizes)
    return ErrorFit(
        eps0=float(fit.eps0),
        d_gamma2=float(fit.d_gamma2),
        sigma2=float(fit.sigma2),
        r2=None if fit.r2 is None else float(fit.r2),
        points=len(points),
    )
