"""What a round reads: its economics, its clock, artifact retention, and the training it runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, TypeAdapter, field_validator

from mots.economics.utility import Utility
from mots.platform.settings.registry import Group

DEFAULT_MECHANISM = "swan_robust"
_UTILITY: TypeAdapter[Utility] = TypeAdapter(Utility)


class Mechanism(Group):
    """Which mechanism prices rounds."""

    owner: ClassVar[str] = "pricing"

    mechanism: str | None = Field(
        None,
        description="mechanism that prices a round (a name from the mechanism registry); the"
        f" orchestration asks for it, pricing uses it when a request names none; unset:"
        f" {DEFAULT_MECHANISM}",
    )

    @property
    def default_mechanism(self) -> str:
        """``mechanism``, else the platform's default."""
        return self.mechanism or DEFAULT_MECHANISM


class MarketValue(Group):
    """What a model is worth to the market: U(ε), read by the rounds and by every edge agent."""

    owner: ClassVar[str] = "orchestration"

    utility: dict[str, Any] = Field(
        default_factory=lambda: {"kind": "power", "scale": 1.0, "exponent": 8.0},
        validation_alias="MOTS_UTILITY",
        description="U(ε) of the market as a JSON object (the scenario file's utility block);"
        " the edge agents read the same variable to value the model as the market does",
    )

    @field_validator("utility", mode="before")
    @classmethod
    def _utility_is_valid(cls, value: Any) -> dict[str, Any]:
        """A JSON text or object that parses as a supported utility (power, exponential)."""
        try:
            data = json.loads(value) if isinstance(value, str | bytes) else value
            _UTILITY.validate_python(data)
        except ValueError as exc:
            raise ValueError(f"MOTS_UTILITY: not a valid utility: {exc}") from exc
        return dict(data)

    def utility_model(self) -> Utility:
        """U(ε) as an object with ``value``."""
        return _UTILITY.validate_python(self.utility)


class Market(Group):
    """The application's requirement and the subsidy alert."""

    owner: ClassVar[str] = "orchestration"

    eps_req: float | None = Field(
        None, gt=0, description="the application's error requirement ε_req (unset: none)"
    )
    subsidy_alert_share: float = Field(
        0.8,
        gt=0,
        le=1,
        description="share of its budget a round's subsidy may use before the Prometheus rule"
        " MotsRoundSubsidyNearBudget fires (exported as mots_round_subsidy_alert_share)",
    )


class Bond(Group):
    """The participation bond each round's quote carries (mots.economics.bond)."""

    owner: ClassVar[str] = "orchestration"

    bond_detection_rate: float = Field(
        1.0,
        gt=0,
        le=1,
        description="q: the probability verification catches a shirker over a market round"
        " (measured in docs/training.md, 'Copies and shirking': for the rescaled E/4 shirker at 5"
        " FedAvg rounds and the shipped min_spread_ratio 0.35, 3 of 36 at D = 50, 4 of 36 at"
        " D = 120, 7 of 24 at D = 300); each round's quote then carries the bond B_i ="
        " max(0, (1 − φ − q)/q)·C_i, held from each joiner's wallet at join and slashed on a"
        " failed verification. 1 (the default): no bond, joiners need no funds",
    )
    bond_work_fraction: float = Field(
        0.25,
        ge=0,
        le=1,
        description="φ: the share of the asked work the deterred shirker does (E/4 of the E local"
        " steps: 0.25); it saves (1 − φ)·C_i",
    )


class RoundClock(Group):
    """How long a round may spend in each state, and when rounds open."""

    owner: ClassVar[str] = "orchestration"

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


class Retention(Group):
    """How long trained models are kept."""

    owner: ClassVar[str] = "orchestration"

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


class Training(Group):
    """The federated training a round runs (Flower deployment or in-process engine)."""

    owner: ClassVar[str] = "orchestration"

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
    superlink_port: int = Field(
        9500,
        ge=0,
        le=65000,
        description="local SuperLink's first port (it takes n_nodes + 2 from there); 0: a free"
        " block found when the federation starts (`mots platform up --free-ports`)",
    )
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
    federation_dir: str = Field(
        "out/platform/federation",
        description="working directory of the local Flower federation (its TLS material, logs)",
    )
    device_data_dir: str | None = Field(
        None,
        description="the local federation's devices' own data: <task>/type-<i+1>-<jjj> per device "
        "(as `mots data split` lays folders out); a task without a folder here trains on folders "
        "cut from its public set under MOTS_FEDERATION_DIR/data (unset: every task so)",
    )
    train_policy: str = Field(
        "{}",
        description="JSON of mots.training.verification.VerificationPolicy: how updates are "
        "verified and combined (aggregator: mean, trimmed_mean or median), the drop-out deadline "
        "and minimum share, the quality gate ({} = the defaults)",
    )


class ServerApp(Group):
    """Where the deployment engine finds the Flower app that ``flwr run`` submits."""

    owner: ClassVar[str] = "training"

    server_app_dir: Path | None = Field(
        None,
        description="directory of the Flower app (edge/flower_app, holding pyproject.toml) that "
        "the deployment engine submits; unset: the installed edge.flower_app package's directory",
    )
