"""The gate a round's final model passes before it is published: finite, and no worse than
``quality_factor`` × the untrained model's test loss or × the quoted ε (docs/training.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mots.training.verification import VerificationPolicy


@dataclass(frozen=True)
class QualityGate:
    """Whether the final model may be published, and why not."""

    passed: bool
    reason: str
    epsilon: float
    initial_epsilon: float | None
    quoted_epsilon: float | None


def quality_gate(
    epsilon: float,
    *,
    initial_epsilon: float | None,
    quoted_epsilon: float | None,
    policy: VerificationPolicy,
    finite_weights: bool = True,
) -> QualityGate:
    """Refuse a final model that is non-finite, or worse than ``quality_factor`` × the test loss
    of the untrained model (``initial_epsilon``) or × the quoted ε."""

    def gate(ok: bool, reason: str) -> QualityGate:
        return QualityGate(ok, reason, epsilon, initial_epsilon, quoted_epsilon)

    if not finite_weights or not math.isfinite(epsilon):
        return gate(False, f"the final model is not finite (ε = {epsilon})")
    if (
        initial_epsilon is not None
        and math.isfinite(initial_epsilon)
        and epsilon > policy.quality_factor * initial_epsilon
    ):
        return gate(
            False,
            f"ε = {epsilon:.4f} exceeds {policy.quality_factor} × the untrained model's "
            f"{initial_epsilon:.4f}",
        )
    if (
        quoted_epsilon is not None
        and math.isfinite(quoted_epsilon)
        and quoted_epsilon > 0.0
        and epsilon > policy.quality_factor * quoted_epsilon
    ):
        return gate(
            False,
            f"ε = {epsilon:.4f} exceeds {policy.quality_factor} × the quoted ε = {quoted_epsilon:.4f}",
        )
    return gate(True, "published")
