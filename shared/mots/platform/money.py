"""Exact money: amounts are integers of micro-units (10⁻⁶) in storage and Decimal strings on the wire.

The economics core computes prices and rewards as floats; :func:`to_micros` rounds them once,
half-even, at the boundary, and every ledger sum after that is integer arithmetic.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

MICROS_PER_UNIT = 1_000_000
QUANTUM = Decimal("0.000001")


def to_micros(amount: Decimal | float | int | str) -> int:
    """Round an amount to the nearest micro-unit (half-even) and return it as an integer."""
    try:
        d = Decimal(str(amount)) if isinstance(amount, float) else Decimal(amount)
    except InvalidOperation as exc:
        raise ValueError(f"amount: {amount!r} is not a number") from exc
    if not d.is_finite():
        raise ValueError(f"amount: {amount!r} must be finite")
    return int((d * MICROS_PER_UNIT).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def from_micros(micros: int) -> Decimal:
    """The Decimal amount of an integer number of micro-units, with six decimal places."""
    return (Decimal(micros) / MICROS_PER_UNIT).quantize(QUANTUM)
