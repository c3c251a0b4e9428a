"""The error model (Eq. 3): its prior, how measurements update it, when it is refitted."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field, field_validator

from mots.platform.settings.registry import Group

CALIBRATED_PRIOR = {"eps0": 0.65, "d_gamma2": 39.4, "sigma2": 0.0}
"""Eq. (3) fitted to the default training (R = 5, E = 20, b = 32, η0 = 0.5, logistic, Fashion-MNIST
IID, the whole test set): 22 coalitions × 3 seeds, R² = 0.78, by ``mots sweep --rounds 5
--local-steps 20 --seeds 3 --coalition …`` (docs/training.md, "The platform's prior"). With it the
demo's first round prices what the evaluation service then measures (K* = (0, 5, 5): predicted
0.673, measured 0.667 on Flower); a prior made for longer training promised 0.53 and the round
measured 0.805. On i.i.d. shards σ² fits to 0: no client drift to model."""

_PARAMETERS = {"eps0", "d_gamma2", "sigma2"}


def _three(name: str, sd: dict[str, float], *, positive: bool) -> dict[str, float]:
    """One finite value per parameter of Eq. 3 (> 0, or ≥ 0), nothing else."""
    if set(sd) != _PARAMETERS:
        raise ValueError(f"{name}: give eps0, d_gamma2 and sigma2, got {sorted(sd)}")
    if not all(math.isfinite(v) and (v > 0 if positive else v >= 0) for v in sd.values()):
        bound = "> 0" if positive else "≥ 0"
        raise ValueError(f"{name}: every standard deviation must be finite and {bound}")
    return sd


class ErrorPrior(Group):
    """The prior of the error model: what rounds are priced with before any measurement."""

    owner: ClassVar[str] = "evaluation"

    prior_error_model: dict[str, float] = Field(
        default_factory=lambda: dict(CALIBRATED_PRIOR),
        description="ε0, dγ², σ² of the error model's prior, used until enough rounds are measured",
    )
    min_fit_points: int = Field(
        4,
        ge=3,
        description="distinct coalitions measured before the error model is refitted (and before"
        " a round is priced with the fit rather than the prior)",
    )


class ErrorUpdates(Group):
    """How the evaluation service measures models and moves the error model's posterior."""

    owner: ClassVar[str] = "evaluation"

    data_dir: str | None = Field(
        None,
        description="directory of the test set's files (the training package's default if unset)",
    )
    eval_test_subset: int | None = Field(
        None,
        ge=1,
        description="test examples each model is evaluated on (unset: the whole test set)",
    )
    prior_error_sd: dict[str, float] = Field(
        default_factory=lambda: {"eps0": 0.2, "d_gamma2": 30.0, "sigma2": 0.05},
        description="the prior's standard deviation of each of ε0, dγ², σ² (independent)",
    )
    error_noise_sd: float = Field(
        0.02,
        gt=0,
        le=10,
        description="standard deviation of a measured test loss around Eq. 3's ε(K) (seeds, "
        "test subset): how far one measurement moves the posterior",
    )
    error_drift_sd: dict[str, float] = Field(
        default_factory=lambda: {"eps0": 0.01, "d_gamma2": 1.0, "sigma2": 0.005},
        description="how far each of ε0, dγ², σ² may drift per measured round (standard "
        "deviations of a random walk, mots.economics.error_online): older rounds count less, so "
        "the estimate tracks the coalitions the market forms now; all 0: never forget",
    )

    @field_validator("error_drift_sd")
    @classmethod
    def _three_drifts(cls, sd: dict[str, float]) -> dict[str, float]:
        """One finite sd ≥ 0 for each of eps0, d_gamma2, sigma2, nothing else."""
        return _three("error_drift_sd", sd, positive=False)

    @field_validator("prior_error_sd")
    @classmethod
    def _three_positive_sds(cls, sd: dict[str, float]) -> dict[str, float]:
        """One finite sd > 0 for each of eps0, d_gamma2, sigma2, nothing else."""
        return _three("prior_error_sd", sd, positive=True)
