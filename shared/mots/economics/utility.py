"""Model utility U(ε) (Section 2.A.3): families with their derivatives and the paper's curvature assumption.

The paper assumes U ≥ 0, U' ≤ 0 and (ε − σ²)U''(ε) + 2U'(ε) ≥ 0 for ε ≠ σ² (Section 2.A.3). Every
family here is convex in ε, which the exact solver in :mod:`mots.economics.optimum` relies on.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

FloatArray = npt.NDArray[np.float64]
ArrayLike = float | FloatArray


class _UtilityBase(BaseModel):
    """Shared configuration of the utility families: frozen, strict fields, no NaN or infinity."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def value(self, eps: ArrayLike) -> FloatArray:
        """U(ε); ε = +∞ (no model) gives 0."""
        raise NotImplementedError  # pragma: no cover - abstract

    def d1(self, eps: ArrayLike) -> FloatArray:
        """U'(ε)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def d2(self, eps: ArrayLike) -> FloatArray:
        """U''(ε)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def curvature_condition(self, eps: ArrayLike, sigma2: float) -> FloatArray:
        """(ε − σ²)U''(ε) + 2U'(ε): the paper's assumption holds where this is ≥ 0 (Section 2.A.3)."""
        e = np.asarray(eps, dtype=np.float64)
        return np.asarray((e - sigma2) * self.d2(e) + 2.0 * self.d1(e), dtype=np.float64)


class PowerUtility(_UtilityBase):
    """U(ε) = scale · ε^(−exponent); the paper's experiments use 40·ε^−16 (Section 4.A.2)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"kind": "power", "scale": 1.0, "exponent": 8.0}]}
    )

    kind: Literal["power"] = "power"
    scale: float = Field(40.0, gt=0, description="multiplier a in a·ε^(−b)")
    exponent: float = Field(16.0, gt=0, description="exponent b in a·ε^(−b)")

    def value(self, eps: ArrayLike) -> FloatArray:
        e = np.asarray(eps, dtype=np.float64)
        with np.errstate(divide="ignore", over="ignore"):
            return np.asarray(self.scale * np.power(e, -self.exponent), dtype=np.float64)

    def d1(self, eps: ArrayLike) -> FloatArray:
        e = np.asarray(eps, dtype=np.float64)
        with np.errstate(divide="ignore", over="ignore"):
            return np.asarray(
                -self.scale * self.exponent * np.power(e, -self.exponent - 1.0), dtype=np.float64
            )

    def d2(self, eps: ArrayLike) -> FloatArray:
        e = np.asarray(eps, dtype=np.float64)
        b = self.exponent
        with np.errstate(divide="ignore", over="ignore"):
            return np.asarray(self.scale * b * (b + 1.0) * np.power(e, -b - 2.0), dtype=np.float64)


class ExponentialUtility(_UtilityBase):
    """U(ε) = scale · exp(−rate · ε): bounded utility that saturates as ε → 0."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"kind": "exponential", "scale": 10.0, "rate": 4.0}]}
    )

    kind: Literal["exponential"] = "exponential"
    scale: float = Field(..., gt=0, description="U at ε = 0")
    rate: float = Field(..., gt=0, description="decay rate per unit of ε")

    def value(self, eps: ArrayLike) -> FloatArray:
        e = np.asarray(eps, dtype=np.float64)
        return np.asarray(self.scale * np.exp(-self.rate * e), dtype=np.float64)

    def d1(self, eps: ArrayLike) -> FloatArray:
        return np.asarray(-self.rate * self.value(eps), dtype=np.float64)

    def d2(self, eps: ArrayLike) -> FloatArray:
        return np.asarray(self.rate * self.rate * self.value(eps), dtype=np.float64)


Utility = Annotated[PowerUtility | ExponentialUtility, Field(discriminator="kind")]
"""Any supported utility family, chosen by its ``kind``."""
