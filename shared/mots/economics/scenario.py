"""The market's primitives (Section 2): client types, the error model of Eq. (3), U(ε) and ε_req.

A :class:`Scenario` is validated on construction: every rejection names the field and the rule.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mots.economics.utility import PowerUtility, Utility

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


SCENARIO_EXAMPLE: dict[str, Any] = {
    "types": [
        {"name": "type-1", "count": 10, "data_size": 50, "cost": 0.5},
        {"name": "type-2", "count": 5, "data_size": 120, "cost": 1.2},
        {"name": "type-3", "count": 5, "data_size": 300, "cost": 3.0},
    ],
    "error_model": {"d_gamma2": 10.0, "sigma2": 0.02, "eps0": 0.3},
    "utility": {"kind": "power", "scale": 1.0, "exponent": 8.0},
    "eps_req": None,
}
"""A realistic scenario (Table 1's MNIST column with C_i = 0.01·D_i): the OpenAPI example."""


class ClientType(BaseModel):
    """One client type i (Section 2.A.2): N_i clients, each with D_i samples and participation cost C_i."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [{"name": "type-1", "count": 10, "data_size": 50, "cost": 0.5}]
        },
    )

    name: str = Field(..., min_length=1, description="label of the type, unique in the scenario")
    count: int = Field(..., ge=1, description="N_i, number of clients of this type")
    data_size: float = Field(..., gt=0, description="D_i, samples per client")
    cost: float = Field(..., ge=0, description="C_i, participation cost per client")


class ErrorModel(BaseModel):
    """Parameters of the generalization error ε(K) = ε0 + dγ²/K² Σ K_i/D_i + (K−1)/K σ² (Eq. 3).

    ``eps0`` is the irreducible loss that a measured test loss holds and Eq. (3) lacks; network
    effects (differences of ε) do not see it. ``d`` and ``gamma2`` may be given instead of ``d_gamma2``.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"examples": [{"d_gamma2": 10.0, "sigma2": 0.02, "eps0": 0.3}]},
    )

    d_gamma2: float = Field(..., gt=0, description="d·γ², feature dimension times data variance")
    sigma2: float = Field(0.0, ge=0, description="σ², client (distribution) variance")
    eps0: float = Field(0.0, ge=0, description="irreducible error added to Eq. (3)")

    @model_validator(mode="before")
    @classmethod
    def _combine_d_and_gamma2(cls, data: Any) -> Any:
        """Accept {d, gamma2} as well as {d_gamma2}; reject giving both forms."""
        if not isinstance(data, dict) or ("d" not in data and "gamma2" not in data):
            return data
        data = dict(data)
        if "d_gamma2" in data:
            raise ValueError(
                "error_model: give either d_gamma2 or both d and gamma2, not both forms"
            )
        if "d" not in data or "gamma2" not in data:
            raise ValueError("error_model: d and gamma2 must be given together")
        d, gamma2 = data.pop("d"), data.pop("gamma2")
        for name, v in (("d", d), ("gamma2", gamma2)):
            if (
                not isinstance(v, int | float)
                or isinstance(v, bool)
                or not math.isfinite(v)
                or v <= 0
            ):
                raise ValueError(f"error_model.{name} must be a finite number > 0, got {v!r}")
        data["d_gamma2"] = float(d) * float(gamma2)
        return data

    @property
    def heterogeneity_ratio(self) -> float:
        """σ²/(dγ²): the threshold on 1/D_j in Theorem 2 and the regime split of Proposition 1."""
        return self.sigma2 / self.d_gamma2


class Scenario(BaseModel):
    """A market instance: client types in increasing data size, error model, utility and ε_req."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"examples": [SCENARIO_EXAMPLE]},
    )

    types: list[ClientType] = Field(
        ..., min_length=1, description="client types, D_i non-decreasing"
    )
    error_model: ErrorModel
    utility: Utility = Field(default_factory=PowerUtility)
    eps_req: float | None = Field(
        None, gt=0, allow_inf_nan=True, description="ε_req; absent (or .inf) means no requirement"
    )

    @field_validator("eps_req")
    @classmethod
    def _inf_means_none(cls, v: float | None) -> float | None:
        """ε_req = +∞ is the same as no requirement; NaN is rejected."""
        if v is None:
            return None
        if math.isnan(v):
            raise ValueError("eps_req must be a number > 0 or absent, not NaN")
        return None if math.isinf(v) else v

    @model_validator(mode="after")
    def _check_types(self) -> Scenario:
        """Type names are unique and data sizes non-decreasing (Section 2.A.2: D_i ≤ D_j for i ≤ j)."""
        seen: set[str] = set()
        for i, t in enumerate(self.types):
            if t.name in seen:
                raise ValueError(f"types[{i}].name: {t.name!r} is used twice; names must be unique")
            seen.add(t.name)
        for i in range(1, len(self.types)):
            prev, cur = self.types[i - 1], self.types[i]
            if cur.data_size < prev.data_size:
                raise ValueError(
                    f"types[{i}].data_size: types must be in non-decreasing data size "
                    f"(D_{i + 1} = {cur.data_size} < D_{i} = {prev.data_size})"
                )
        return self

    @property
    def counts(self) -> IntArray:
        """N_i per type."""
        return np.array([t.count for t in self.types], dtype=np.int64)

    @property
    def sizes(self) -> FloatArray:
        """D_i per type."""
        return np.array([t.data_size for t in self.types], dtype=np.float64)

    @property
    def costs(self) -> FloatArray:
        """C_i per type."""
        return np.array([t.cost for t in self.types], dtype=np.float64)

    @property
    def n_clients(self) -> int:
        """N = Σ N_i."""
        return int(sum(t.count for t in self.types))

    @property
    def n_types(self) -> int:
        """I, the number of types."""
        return len(self.types)

    @property
    def eps_req_value(self) -> float:
        """ε_req as a number (+∞ when absent)."""
        return math.inf if self.eps_req is None else self.eps_req

    def with_eps_req(self, eps_req: float | None) -> Scenario:
        """A copy with another requirement (what-if queries)."""
        return self.model_copy(update={"eps_req": self._inf_means_none(eps_req)})
