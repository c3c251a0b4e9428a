"""Training configuration (Section 5): data set, model, partition, FedAvg hyper-parameters.

Defaults are chosen so that the non-monotonic network effect of Eq. (3) is measurable in minutes
on two CPU cores (logistic regression, η0 = 0.5, uniform averaging, R = 100); the paper's MNIST
values (η0 = 0.001, R = 500) are :meth:`TrainConfig.paper_mnist`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DatasetName = Literal["fashion-mnist", "mnist", "cifar10", "svhn"]
ModelName = Literal["logistic", "cnn"]
PartitionName = Literal["iid", "label_skew"]
ShardsName = Literal["reuse", "disjoint"]
AggregationName = Literal["uniform", "weighted"]

PAPER_MNIST_SIZES = (50, 120, 300)
"""D_i of Table 1's MNIST column, the stand-in sizes on Fashion-MNIST."""
PAPER_COUNTS = (10, 5, 5)
"""N_i of Section 5: ten type-1, five type-2 and five type-3 clients."""
DEFAULT_CLASSES_PER_TYPE = (1, 5, 10)
"""Label skew of Section 5: type 1 holds one class, type 2 five, type 3 all ten."""


class TrainConfig(BaseModel):
    """Everything that determines a federated training run (and hence its test loss ε)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    dataset: DatasetName = "fashion-mnist"
    data_dir: Path | None = Field(None, description="directory of the data set's files")
    model: ModelName = "logistic"
    partition: PartitionName = "iid"
    shards: ShardsName = Field(
        "reuse",
        description="reuse: shards are disjoint while Σ N_i·D_i fits the training set, then "
        "further seeded passes over it (shards overlap); disjoint: refuse populations that do not fit",
    )
    sizes: tuple[int, ...] = Field(PAPER_MNIST_SIZES, min_length=1, description="D_i per type")
    counts: tuple[int, ...] | None = Field(
        None, description="N_i per type (clients holding data); default (10, 5, 5) or 10 per type"
    )
    classes_per_type: tuple[int, ...] | None = Field(
        None, description="label_skew: classes each type holds; default (1, 5, 10)"
    )
    rounds: int = Field(100, ge=1, description="R, communication rounds")
    local_steps: int = Field(20, ge=1, description="E, local SGD iterations per round")
    batch_size: int = Field(32, ge=1, description="b, SGD mini-batch size")
    lr: float = Field(0.5, gt=0, description="η0; round r uses η0/(1+r)")
    aggregation: AggregationName = "uniform"
    seed: int = Field(0, ge=0)
    zero_init: bool = Field(True, description="start from w0 = 0 as in the paper")
    test_subset: int | None = Field(None, ge=1, description="evaluate on this many test samples")
    fraction_train: float = Field(
        1.0,
        gt=0,
        le=1,
        description="cross-device sampling: share of the participants that train in each FedAvg "
        "round, as Flower's FedAvg(fraction_train); 1 = every participant every round",
    )
    min_train_clients: int = Field(
        1,
        ge=1,
        description="at least this many participants train per round (Flower's min_train_nodes)",
    )

    @field_validator("sizes", mode="before")
    @classmethod
    def _integral_sizes(cls, value: Any) -> Any:
        """Accept 50.0 for 50 (scenario files carry floats) but not 50.5."""
        if isinstance(value, list | tuple):
            out = []
            for i, v in enumerate(value):
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                    raise ValueError(f"sizes[{i}] must be a whole number of samples, got {v!r}")
                if v != int(v) or v < 1:
                    raise ValueError(f"sizes[{i}] must be a whole number ≥ 1, got {v!r}")
                out.append(int(v))
            return tuple(out)
        return value

    @model_validator(mode="after")
    def _shapes(self) -> TrainConfig:
        """counts and classes_per_type, when given, have one entry per type and sane values."""
        n = len(self.sizes)
        if self.counts is not None:
            if len(self.counts) != n:
                raise ValueError(
                    f"counts must have one entry per type ({n}), got {len(self.counts)}"
                )
            if any(c < 1 for c in self.counts):
                raise ValueError("counts: every N_i must be ≥ 1")
        if self.classes_per_type is not None:
            if len(self.classes_per_type) != n:
                raise ValueError(
                    f"classes_per_type must have one entry per type ({n}), "
                    f"got {len(self.classes_per_type)}"
                )
            if any(not 1 <= c <= 10 for c in self.classes_per_type):
                raise ValueError("classes_per_type: each entry must lie in 1..10")
        return self

    @property
    def n_types(self) -> int:
        """I, the number of client types."""
        return len(self.sizes)

    @property
    def type_counts(self) -> tuple[int, ...]:
        """N_i per type: ``counts`` or the paper's (10, 5, 5) for three types, else 10 each."""
        if self.counts is not None:
            return self.counts
        return PAPER_COUNTS if self.n_types == 3 else (10,) * self.n_types

    @property
    def type_classes(self) -> tuple[int, ...]:
        """Classes held per type under label skew: ``classes_per_type`` or (1, 5, 10)."""
        if self.classes_per_type is not None:
            return self.classes_per_type
        if self.n_types == 3:
            return DEFAULT_CLASSES_PER_TYPE
        return tuple(
            min(10, 1 + round(9 * i / max(1, self.n_types - 1))) for i in range(self.n_types)
        )

    def check_participants(self, participants: list[int] | tuple[int, ...]) -> tuple[int, ...]:
        """Validate K (participants per type) against the types and N_i; return it as a tuple."""
        k = tuple(int(x) for x in participants)
        if len(k) != self.n_types:
            raise ValueError(f"participants must have one entry per type ({self.n_types}), got {k}")
        for i, (ki, ni) in enumerate(zip(k, self.type_counts, strict=True)):
            if ki < 0 or ki > ni:
                raise ValueError(f"participants[{i}] must lie in 0..{ni} (N_{i + 1}), got {ki}")
        if sum(k) == 0:
            raise ValueError("participants: the coalition is empty (K = 0 trains no model)")
        return k

    @classmethod
    def paper_mnist(cls, **overrides: Any) -> TrainConfig:
        """Section 5's MNIST setup: logistic regression, i.i.d., b = 32, η0 = 0.001, E = 20, R = 500."""
        values: dict[str, Any] = {
            "model": "logistic",
            "partition": "iid",
            "batch_size": 32,
            "lr": 0.001,
            "local_steps": 20,
            "rounds": 500,
            "zero_init": True,
            "aggregation": "weighted",
        }
        values.update(overrides)
        return cls(**values)

    @classmethod
    def paper_cifar10(cls, **overrides: Any) -> TrainConfig:
        """Section 5's CIFAR-10 setup: CNN, label skew, b = 64, η0 = 0.1, E = 30, R = 600."""
        values: dict[str, Any] = {
            "dataset": "cifar10",
            "model": "cnn",
            "partition": "label_skew",
            "sizes": (1000, 2250, 5750),
            "batch_size": 64,
            "lr": 0.1,
            "local_steps": 30,
            "rounds": 600,
            "aggregation": "weighted",
        }
        values.update(overrides)
        return cls(**values)
