"""Exact money at the boundary: floats round once, half-even, to micro-units; sums stay integers."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from mots.platform.money import Money, from_micros, money, to_micros


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


class _Amount(BaseModel):
    amount: Money


@pytest.mark.parametrize(
    ("given", "wire"),
    [("-0.9", "-0.900000"), ("1", "1.000000"), ("0.000001", "0.000001"), ("1E+2", "100.000000")],
)
def test_money_leaves_as_a_six_place_string(given: str, wire: str) -> None:
    """Whatever exponent a Decimal carries, the JSON form has exactly six places."""
    assert _Amount(amount=Decimal(given)).model_dump(mode="json") == {"amount": wire}
    assert _Amount.model_validate_json(f'{{"amount": "{wire}"}}').amount == Decimal(given)


def test_money_in_refuses_a_seventh_place_and_money_rounds_a_computed_float() -> None:
    """Input is never rounded silently; a float the platform computed rounds once, as booked."""
    with pytest.raises(ValidationError, match="decimal places"):
        _Amount(amount=Decimal("0.1234567"))
    assert money(-0.9000000000000004) == Decimal("-0.900000")
    assert money(1.0499999999999972) == Decimal("1.050000")


amount_strings = st.builds(
    lambda sign, whole, frac: f"{sign}{whole}{'.' + frac if frac else ''}",
    st.sampled_from(["", "-"]),
    st.integers(0, 10**11).map(str),
    st.text("0123456789", max_size=6),
)
"""Canonical money strings: optional minus, ASCII digits without leading zeros, ≤ 6 decimals."""

LOOSE = [" 1", "1 ", "1_000", "+5", "1e3", "1E3", "0x10", "١", "１", "01", ".5", "5.", "1.0000000",
         "NaN", "Infinity", "-", "", "1,5", "٣.٥"]  # fmt: skip
"""Strings Python's Decimal reads (most of them) that no client may send as an amount."""


@given(amount_strings)
def test_every_canonical_amount_string_is_read_exactly(text: str) -> None:
    """A canonical string is accepted and read as exactly its Decimal value."""
    assert _Amount.model_validate_json(f'{{"amount": "{text}"}}').amount == Decimal(text)


@given(amount_strings, st.sampled_from([" ", "+", "_", "e3", "\u0661", "\uff11", "0x"]))
def test_a_canonical_string_spoilt_anywhere_is_refused(text: str, junk: str) -> None:
    """Inserting a blank, sign, separator, exponent, hex prefix or non-ASCII digit: refused."""
    for at in (0, len(text) // 2, len(text)):
        spoilt = text[:at] + junk + text[at:]
        with pytest.raises(ValidationError, match="amount"):
            _Amount.model_validate({"amount": spoilt})


@pytest.mark.parametrize("loose", LOOSE)
def test_loose_amount_strings_are_refused_naming_the_rule(loose: str) -> None:
    """Each is a validation error of ``amount``; none is read as a number."""
    with pytest.raises(ValidationError) as err:
        _Amount.model_validate({"amount": loose})
    assert err.value.errors()[0]["loc"] == ("amount",)


@pytest.mark.parametrize("bad", [True, False, float("nan"), float("inf"), Decimal("NaN")])
def test_booleans_and_non_finite_numbers_are_not_amounts(bad: object) -> None:
    """JSON true/false, a non-finite float and a non-finite Decimal are refused."""
    with pytest.raises(ValidationError):
        _Amount.model_validate({"amount": bad})


@pytest.mark.parametrize("number", ["2.5", "7", "0", "-1", "1e2", "0.1234567"])
def test_json_numbers_are_refused_with_a_one_line_hint_naming_the_field(number: str) -> None:
    """A JSON number is never read as money (it may have been rounded already): a one-line hint
    says to send the amount as a string, and the error's location names the field."""
    with pytest.raises(ValidationError) as err:
        _Amount.model_validate_json(f'{{"amount": {number}}}')
    (only,) = err.value.errors()
    assert only["loc"] == ("amount",) and only["type"] == "money_type"
    assert "\n" not in only["msg"] and "decimal string" in only["msg"] and "quotes" in only["msg"]
    with pytest.raises(ValidationError):  # as FastAPI validates a parsed body: Python int/float
        _Amount.model_validate({"amount": json.loads(number)})
    assert _Amount.model_validate_json('{"amount": "2.5"}').amount == Decimal("2.5")
