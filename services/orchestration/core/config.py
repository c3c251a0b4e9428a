"""Settings of the orchestration service: the registry's groups it reads
(``mots.platform.settings``), and the checks that join them."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from pydantic import field_validator, model_validator

from mots.platform.settings import CALIBRATED_PRIOR, PlatformSettings
from mots.platform.settings.common import Database
from mots.platform.settings.evaluation import ErrorPrior
from mots.platform.settings.market import Artifacts, StoredTasks, SubsidyBudget
from mots.platform.settings.rounds import (
    Bond,
    Market,
    MarketValue,
    Mechanism,
    Retention,
    RoundClock,
    Training,
)

__all__ = ["CALIBRATED_PRIOR", "Settings", "get_settings"]


class Settings(
    PlatformSettings,
    Database,
    Mechanism,
    Market,
    MarketValue,
    SubsidyBudget,
    Bond,
    ErrorPrior,
    RoundClock,
    Retention,
    Training,
    Artifacts,
    StoredTasks,
):
    """The orchestration API and worker read these."""

    database_name: ClassVar[str] = "orchestration"

    @field_validator("superlink_address")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        """Empty means unset; anything else must be host:port."""
        from mots.training.external_superlink import parse_address

        if value is None or not value.strip():
            return None
        parse_address(value, "MOTS_SUPERLINK_ADDRESS")
        return value.strip()

    @field_validator("train_policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        """The policy must parse; the error names the variable and the field."""
        from mots.training.verification import VerificationPolicy

        try:
            VerificationPolicy.model_validate_json(value or "{}")
        except ValueError as exc:
            raise ValueError(f"MOTS_TRAIN_POLICY: {exc}") from exc
        return value or "{}"

    @model_validator(mode="after")
    def _visibility_outlasts_training(self) -> Settings:
        """Redis must not hand the training step to another delivery while it still runs."""
        if self.broker_visibility_timeout_s <= self.train_timeout_s:
            raise ValueError(
                "MOTS_BROKER_VISIBILITY_TIMEOUT_S must exceed MOTS_TRAIN_TIMEOUT_S "
                f"({self.broker_visibility_timeout_s} <= {self.train_timeout_s}): a training "
                "step still running would be delivered again"
            )
        return self

    def phase_budget_s(self, state: str) -> float:
        """Seconds a round may spend in ``state`` (its deadline once entered): the collection
        timeout, the training timeout, the evaluation timeout, else one service call's."""
        return {
            "collecting": self.collect_timeout_s,
            "training": self.train_timeout_s,
            "evaluating": self.evaluate_timeout_s,
        }.get(state, self.task_timeout_s)

    def verification_policy(self) -> Any:
        """The training's :class:`~mots.training.verification.VerificationPolicy`."""
        from mots.training.verification import VerificationPolicy

        return VerificationPolicy.model_validate_json(self.train_policy)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
