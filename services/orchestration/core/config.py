"""Settings of the orchestration service (environment variables with the prefix ``MOTS_``)."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mots.platform.settings import CALIBRATED_PRIOR as PRIOR_ERROR_MODEL
from mots.platform.settings import PlatformSettings

CALIBRATED_PRIOR = dict(PRIOR_ERROR_MODEL)
"""Eq. (3) fitted to the default training (R = 5, E = 20, b = 32, η0 = 0.5, logistic, Fashion-MNIST
IID, the whole test set): 22 coalitions × 3 seeds, R² = 0.78, by ``mots sweep --rounds 5
--local-steps 20 --seeds 3 --coalition …`` (docs/training.md, "The platform's prior"). With it the
demo's first round prices what the evaluation service then measures (K* = (0, 5, 5): predicted
0.673, measured 0.667 on Flower); a prior made for longer training promised 0.53 and the round
measured 0.805. On i.i.d. shards σ² fits to 0: no client drift to model."""


class Settings(PlatformSettings):
    """The orchestration API and worker read these."""

    database_url: str = Field(
        "sqlite:///out/platform/orchestration.db",
        description="SQLAlchemy URL of the rounds database (SQLite default, or PostgreSQL)",
    )
    mechanism: str | None = Field(
        None, description="mechanism that prices rounds; the pricing service's default if unset"
    )
    utility: dict[str, Any] = Field(
        default_factory=lambda: {"kind": "power", "scale": 1.0, "exponent": 8.0},
        description="U(ε) of the market as a JSON object (the scenario file's utility block)",
    )
    eps_req: float | None = Field(
        None, gt=0, description="the application's error requirement ε_req (unset: none)"
    )
    prior_error_model: dict[str, float] = Field(
        default_factory=lambda: dict(CALIBRATED_PRIOR),
        description="ε0, dγ², σ² used until the evaluation service has measured enough rounds",
    )
    round_subsidy_budget: Decimal = Field(
        Decimal(100),
        ge=0,
        le=10**9,
        description="most the platform subsidises one round (currency units); a round's payouts"
        " beyond it are scaled down pro rata at settlement (POST /v1/rounds may set its own)",
    )
    subsidy_alert_share: float = Field(
        0.8,
        gt=0,
        le=1,
        description="share of its budget a round's subsidy may use before the Prometheus rule"
        " MotsRoundSubsidyNearBudget fires (exported as mots_round_subsidy_alert_share)",
    )
    collect_timeout_s: float = Field(
        60.0, gt=0, description="longest a round waits for decisions; the silent abstain"
    )
    evaluate_timeout_s: float = Field(
        120.0,
        gt=0,
        description="longest a round waits for its evaluation (the evaluating state's deadline); "
        "a lost evaluation is then asked for again while the trained model exists",
    )
    retry_interval_s: float = Field(
        2.0, gt=0, description="seconds before a step whose service call was lost runs again"
    )
    reconcile_interval_s: float = Field(
        5.0,
        gt=0,
        description="how often the worker's reconciler re-drives rounds past their state's deadline",
    )
    artifact_retention_rounds: int | None = Field(
        None,
        ge=1,
        description="keep the model artifacts of the last N rounds (and those within the download "
        "window), delete the rest; unset: keep every artifact",
    )
    download_window_s: float = Field(
        604800.0,
        ge=0,
        description="seconds after a round ends during which its buyers and participants may "
        "still download its model: retention keeps its artifact that long",
    )
    round_interval_s: float | None = Field(
        None,
        ge=0,
        description="open the next round this many seconds after the previous one ended (0: back "
        "to back); unset: rounds are opened by hand (POST /v1/rounds)",
    )
    rounds_max: int | None = Field(
        None, ge=1, description="the schedule stops once this many rounds exist (unset: never)"
    )
    poll_interval_s: float = Field(
        0.5, gt=0, description="how often a collecting round re-reads the market's decisions"
    )
    trainer: Literal["deployment", "inprocess"] = Field(
        "deployment",
        description="Flower deployment engine (SuperLink + SuperNodes) or the in-process engine",
    )
    superlink_address: str | None = Field(
        None,
        description="host:port of an external SuperLink's Control API (the deployed one with the "
        "edge devices' SuperNodes) that training runs on; unset or empty: start a local federation",
    )
    n_nodes: int = Field(20, ge=1, description="SuperNodes the local federation starts")
    superlink_port: int = Field(9500, ge=1024, le=65000, description="local SuperLink's port")
    train_rounds: int = Field(5, ge=1, description="FedAvg rounds R per market round")
    train_local_steps: int = Field(20, ge=1, description="local SGD iterations E per FedAvg round")
    train_batch_size: int = Field(32, ge=1, description="SGD batch size b")
    train_lr: float = Field(0.5, gt=0, description="initial learning rate η0 (η0/(1+r))")
    train_test_subset: int | None = Field(
        2000, ge=1, description="test examples the training engine evaluates on (unset: all)"
    )
    train_fraction: float = Field(
        1.0,
        gt=0,
        le=1,
        description="cross-device sampling: share of the participants that train in each FedAvg "
        "round (every engine, Flower's ServerApp included; docs/training.md: what it does to "
        "Eq. 3)",
    )
    train_min_clients: int = Field(
        1, ge=1, description="at least this many participants train per FedAvg round"
    )
    train_timeout_s: float = Field(
        900.0, gt=0, description="training longer than this fails the round (settled by rule)"
    )
    artifact_dir: str = Field(
        "out/platform/artifacts", description="where trained model artifacts are written"
    )
    work_dir: str = Field(
        "out/platform/federation", description="working directory of the local Flower federation"
    )
    train_policy: str = Field(
        "{}",
        description="JSON of mots.training.verification.VerificationPolicy: how updates are "
        "verified and combined (aggregator: mean, trimmed_mean or median), the drop-out deadline "
        "and minimum share, the quality gate ({} = the defaults)",
    )

    @field_validator("superlink_address")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        """Empty means unset; anything else must be host:port."""
        from mots.training.federation import parse_address

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
