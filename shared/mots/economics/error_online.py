"""Online Bayesian learning of Eq. (3)'s parameters from every measured round.

ε(K) = ε0 + dγ²·S/K² + σ²·(K−1)/K, with K = Σ_i K_i and S = Σ_i K_i/D_i (Eq. 3 plus the
irreducible loss ε0), is linear in θ = (ε0, dγ², σ²) once the coalition is known:
ε(K) = x(K)ᵀθ with x(K) = (1, S/K², (K−1)/K) (:func:`mots.economics.error_fit.design_matrix`).
A Gaussian prior θ ~ N(m0, P0) and a measured test loss y = x(K)ᵀθ + noise, noise ~ N(0, r),
therefore give an exact Gaussian posterior (Bayesian linear regression, written as the Kalman
update; no linearisation):

    k = P x / (xᵀ P x + r),  m ← m + k (y − xᵀ m),  P ← (I − k xᵀ) P (I − k xᵀ)ᵀ + r k kᵀ.

What one coalition identifies moves, and nothing else: the predictive mean at the measured K
moves to the measurement by the factor xᵀPx / (xᵀPx + r) (all the way as measurements repeat),
while directions of θ that K does not see (vᵀ P x = 0) keep their prior. The market in
equilibrium repeats K*, so the price is right at K* from the first round on, without waiting for
four distinct coalitions as the least-squares refit (:mod:`mots.economics.error_fit`) does.

θ may drift (a random walk, θ_t = θ_{t−1} + w_t, w_t ~ N(0, Q), Q = diag(drift_sd²)): before each
measurement the covariance grows by Q (the Kalman predict step, P ← P + Q), so older measurements
count less and the estimate tracks the coalitions the market forms now. Eq. (3) is a model, and
a 3-parameter curve cannot pass through every coalition's measured loss: with Q = 0 a coalition
measured twenty times outweighs a new one for ever (the soak's market moved to a new K* after 30
rounds and the static posterior's prediction there was still 0.02 off after 20 more), while with
Q > 0 the prediction at a coalition the market repeats converges to its measurement. Q = 0 is the
static posterior (order-free); with Q > 0 the order is the rounds' order.

θ must stay in Eq. (3)'s domain (dγ² > 0, σ² ≥ 0, ε0 ≥ 0): the Gaussian posterior itself is kept
unconstrained (so updates stay exact and order-free), and the point estimate handed to pricing is
its mean projected onto the domain in the posterior's own metric (estimate projection, Simon 2010):
a parameter that would leave the domain is pinned at its bound and the others absorb what it
cannot, weighted by their covariance with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from mots.economics.error_fit import design_matrix
from mots.economics.scenario import ErrorModel

FloatArray = npt.NDArray[np.float64]
PARAMETERS = ("eps0", "d_gamma2", "sigma2")
"""θ's components, in the order of the design matrix's columns."""
LOWER_BOUNDS = np.array([0.0, 1e-6, 0.0])
"""Eq. (3)'s domain: ε0 ≥ 0, dγ² > 0 (here ≥ 1e-6), σ² ≥ 0."""


def _row(participants: Sequence[float] | npt.ArrayLike, sizes: Sequence[float]) -> FloatArray:
    """x(K) of Eq. (3) for one coalition."""
    k = np.atleast_2d(np.asarray(participants, dtype=np.float64))
    return np.asarray(design_matrix(k, sizes)[0], dtype=np.float64)


@dataclass(frozen=True)
class ErrorPosterior:
    """The Gaussian belief N(mean, cov) over θ = (ε0, dγ², σ²) of Eq. (3), the measurement
    noise variance r it assumes, θ's drift variance per measurement (Q's diagonal; zeros: θ is
    fixed) and how many measurements it holds."""

    mean: FloatArray
    cov: FloatArray
    noise_var: float
    points: int = 0
    drift_var: FloatArray = field(default_factory=lambda: np.zeros(3))

    @classmethod
    def prior(
        cls,
        model: ErrorModel,
        sd: Sequence[float],
        noise_sd: float,
        drift_sd: Sequence[float] = (0.0, 0.0, 0.0),
    ) -> ErrorPosterior:
        """The configured prior: θ's mean from ``model``, independent components with standard
        deviations ``sd`` (ε0, dγ², σ²), measurement noise of standard deviation ``noise_sd``,
        θ's drift per measurement of standard deviations ``drift_sd`` (module docstring)."""
        s = np.asarray(sd, dtype=np.float64)
        if s.shape != (3,) or np.any(s <= 0) or not np.all(np.isfinite(s)):
            raise ValueError(f"sd: three finite standard deviations > 0 expected, got {list(sd)}")
        if not (noise_sd > 0 and np.isfinite(noise_sd)):
            raise ValueError(f"noise_sd: a finite standard deviation > 0 expected, got {noise_sd}")
        q = np.asarray(drift_sd, dtype=np.float64)
        if q.shape != (3,) or np.any(q < 0) or not np.all(np.isfinite(q)):
            raise ValueError(
                f"drift_sd: three finite standard deviations ≥ 0, got {list(drift_sd)}"
            )
        mean = np.array([model.eps0, model.d_gamma2, model.sigma2], dtype=np.float64)
        return cls(mean=mean, cov=np.diag(s * s), noise_var=float(noise_sd) ** 2, drift_var=q * q)

    def update(
        self, participants: Sequence[float] | npt.ArrayLike, sizes: Sequence[float], epsilon: float
    ) -> ErrorPosterior:
        """The posterior after one measured test loss ``epsilon`` of coalition K: θ drifts
        (P + Q), then the Kalman step (Joseph form, so that the covariance stays symmetric
        positive semi-definite)."""
        if not np.isfinite(epsilon):
            raise ValueError(f"epsilon: a finite test loss expected, got {epsilon}")
        x = _row(participants, sizes)
        prior_cov = self.cov + np.diag(self.drift_var)
        px = prior_cov @ x
        gain = px / (x @ px + self.noise_var)
        mean = self.mean + gain * (epsilon - x @ self.mean)
        a = np.eye(3) - np.outer(gain, x)
        cov = a @ prior_cov @ a.T + self.noise_var * np.outer(gain, gain)
        return ErrorPosterior(
            mean=mean,
            cov=(cov + cov.T) / 2,
            noise_var=self.noise_var,
            points=self.points + 1,
            drift_var=self.drift_var,
        )

    def update_all(
        self, measurements: Sequence[tuple[Sequence[float], float]], sizes: Sequence[float]
    ) -> ErrorPosterior:
        """The posterior after every ``(K, ε)`` in turn (in the rounds' order; it does not
        matter while θ does not drift)."""
        posterior = self
        for participants, epsilon in measurements:
            posterior = posterior.update(participants, sizes, epsilon)
        return posterior

    def predictive(
        self, participants: Sequence[Sequence[float]] | npt.ArrayLike, sizes: Sequence[float]
    ) -> tuple[FloatArray, FloatArray]:
        """Mean and standard deviation of ε(K) under the posterior for each coalition (rows of
        K): xᵀm and √(xᵀPx) (the model's uncertainty, without a new measurement's noise)."""
        x = design_matrix(np.atleast_2d(np.asarray(participants, dtype=np.float64)), sizes)
        var = np.einsum("ij,jk,ik->i", x, self.cov, x)
        return np.asarray(x @ self.mean), np.sqrt(np.maximum(var, 0.0))

    def point_estimate(self) -> ErrorModel:
        """θ for pricing: the posterior mean projected onto Eq. (3)'s domain (module docstring)."""
        theta = self.mean.copy()
        pinned: list[int] = []
        for _ in range(3):
            low = [i for i in range(3) if theta[i] < LOWER_BOUNDS[i] and i not in pinned]
            if not low:
                break
            pinned += low
            d = np.eye(3)[pinned]
            gap = d @ self.mean - LOWER_BOUNDS[pinned]
            weight = self.cov @ d.T @ np.linalg.pinv(d @ self.cov @ d.T)
            theta = self.mean - weight @ gap
            theta[pinned] = LOWER_BOUNDS[pinned]
        theta = np.maximum(theta, LOWER_BOUNDS)
        return ErrorModel(eps0=float(theta[0]), d_gamma2=float(theta[1]), sigma2=float(theta[2]))

    def sd(self) -> FloatArray:
        """Posterior standard deviation of each of θ's components."""
        return np.asarray(np.sqrt(np.maximum(np.diag(self.cov), 0.0)))
