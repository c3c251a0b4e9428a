"""Exact money at the boundary: floats round once, half-even, to micro-units; sums stay integers."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mots.platform.money import from_micros, to_micros


def test_rounding_is_half_even_at_the_micro_unit() -> None:
    """0.0000005 rounds to 0 and 0.0000015 to 2 micro-units; strings and Decimals are exact."""
    assert to_micros("0.0000005") == 0
    assert to_micros("0.0000015") == 2
    assert to_micros(Decimal("1.25")) == 1_250_000
    assert to_micros(0.1) == 100_000  # the float's shortest repr, not its binary expansion
    assert from_micros(1_250_000) == Decimal("1.250000")


@pytest.mark.parametrize("bad", ["abc", "NaN", "Infinity", float("inf")])
def test_non_numbers_are_refused_with_the_field(bad: object) -> None:
    """Not a finite number: a ValueError that names ``amount``."""
    with pytest.raises(ValueError, match="amount"):
        to_micros(bad)  # type: ignore[arg-type]


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_micros_round_trip(micros: int) -> None:
    """from_micros and to_micros are inverse on integers of micro-units."""
    assert to_micros(from_micros(micros)) == micros
