"""Settings of the evaluation service (environment variables with the prefix ``MOTS_``)."""

from __future__ import annotations

import math
from functools import lru_cache

from pydantic import Field, field_validator

from mots.platform.settings import CALIBRATED_PRIOR, PlatformSettings


class Settings(PlatformSettings):
    """The evaluation worker reads these."""

    database_url: str = Field(
        "sqlite:///out/platform/evaluation.db",
        description="SQLAlchemy URL of the measurements database (SQLite default, or PostgreSQL)",
    )
    data_dir: str | None = Field(
        None,
        description="directory of the test set's files (the training package's default if unset)",
    )
    eval_test_subset: int | None = Field(
        None,
        ge=1,
        description="test examples each model is evaluated on (unset: the whole test set)",
    )
    prior_error_model: dict[str, float] = Field(
        default_factory=lambda: dict(CALIBRATED_PRIOR),
        description="ε0, dγ², σ² of the error model's prior (the same variable the orchestration "
        "reads)",
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
        if set(sd) != {"eps0", "d_gamma2", "sigma2"}:
            raise ValueError(f"error_drift_sd: give eps0, d_gamma2 and sigma2, got {sorted(sd)}")
        if not all(math.isfinite(v) and v >= 0 for v in sd.values()):
            raise ValueError("error_drift_sd: every standard deviation must be finite and ≥ 0")
        return sd

    @field_validator("prior_error_sd")
    @classmethod
    def _three_positive_sds(cls, sd: dict[str, float]) -> dict[str, float]:
        """One finite sd > 0 for each of eps0, d_gamma2, sigma2, nothing else."""
        if set(sd) != {"eps0", "d_gamma2", "sigma2"}:
            raise ValueError(f"prior_error_sd: give eps0, d_gamma2 and sigma2, got {sorted(sd)}")
        if not all(math.isfinite(v) and v > 0 for v in sd.values()):
            raise ValueError("prior_error_sd: every standard deviation must be finite and > 0")
        return sd

    min_fit_points: int = Field(
        4, ge=3, description="distinct coalitions measured before the error model is refitted"
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
