"""Exact money: amounts are integers of micro-units (10⁻⁶) in storage and six-place Decimal strings
on the wire (:data:`Money`).

The economics core computes prices and rewards as floats; :func:`to_micros` rounds them once,
half-even, at the boundary, and every ledger sum after that is integer arithmetic.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer, WithJsonSchema
from pydantic_core import PydanticCustomError

MICROS_PER_UNIT = 1_000_000
QUANTUM = Decimal("0.000001")
MAX_BALANCE_MICROS = 10**18 - 1
"""The largest balance, either sign, any ledger account may hold: 999,999,999,999.999999, the
eighteen digits of :data:`Money` (every balance is shown as Money). Far inside BIGINT (2^63 − 1 ≈
9.22·10^18 micro-units on SQLite and PostgreSQL), so a balance plus one booking's change never
overflows before it is checked; a booking that would pass it is refused (422 naming the account
and this limit), ``external:deposits`` included, so the money deposited in all is bounded too."""
_WIDE = Context(prec=400, rounding=ROUND_HALF_EVEN)
"""Enough digits for any finite float to six places (10³⁰⁸ has 309): the arithmetic here is exact
where the default context's 28 digits would round or fail (a computed quote of a huge market)."""


def to_micros(amount: Decimal | float | int | str) -> int:
    """Round an amount to the nearest micro-unit (half-even) and return it as an integer."""
    try:
        d = Decimal(str(amount)) if isinstance(amount, float) else Decimal(amount)
    except InvalidOperation as exc:
        raise ValueError(f"amount: {amount!r} is not a number") from exc
    if not d.is_finite():
        raise ValueError(f"amount: {amount!r} must be finite")
    return int(_WIDE.multiply(d, MICROS_PER_UNIT).quantize(Decimal(1), context=_WIDE))


def from_micros(micros: int) -> Decimal:
    """The Decimal amount of an integer number of micro-units, with six decimal places."""
    return _WIDE.divide(Decimal(micros), MICROS_PER_UNIT).quantize(QUANTUM, context=_WIDE)


def money(amount: Decimal | float | int | str) -> Decimal:
    """An amount as the ledger would book it: rounded once, half-even, to six decimal places."""
    return from_micros(to_micros(amount))


def money_str(amount: Decimal) -> str:
    """The canonical wire form of an amount: a decimal string with exactly six places."""
    return f"{amount.quantize(QUANTUM, rounding=ROUND_HALF_EVEN, context=_WIDE):f}"


CANONICAL_AMOUNT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]{1,6})?")
"""The only amount strings accepted: optional minus, ASCII digits without leading zeros, at most
six decimals. No sign "+", blanks, "_" separators, exponents, hex or non-ASCII digits (Python's
Decimal would read " 1", "1_000", "+5", "1e3" and "١" as numbers)."""


NUMBER_HINT = (
    'an amount is a decimal string, e.g. "12.5" (at most 6 decimals); a JSON number is refused '
    "(it may not be exact): put the amount in quotes"
)
"""The one-line hint of a money field given a JSON number (the detail names the field before it)."""


def canonical_amount(value: Any) -> Any:
    """Refuse an amount that is not a canonical decimal string (or a Decimal built in Python).

    JSON numbers (Python ``int`` and ``float``, ``bool`` among them) are refused with
    :data:`NUMBER_HINT`: money crosses every API as a string, in and out, so that no client's
    JSON library rounds it through binary floating point on the way.
    """
    if isinstance(value, (bool, int, float)):
        raise PydanticCustomError("money_type", NUMBER_HINT)
    if isinstance(value, str) and not CANONICAL_AMOUNT.fullmatch(value):
        raise PydanticCustomError(
            "money_format",
            "an amount is a canonical decimal string: an optional '-', ASCII digits, at most 6"
            ' decimals, e.g. "12.5" (no blanks, "+", "_", exponent or other digits)',
        )
    if isinstance(value, Decimal) and not value.is_finite():
        raise PydanticCustomError("money_finite", "an amount must be finite")
    return value


FRACTION_RE = r"(?:\.[0-9]{1,6})?"
ZERO_FRACTION_RE = r"(?:\.0{1,6})?"
NONZERO_FRACTION_RE = (
    r"\.(?:[1-9][0-9]{0,5}|0[1-9][0-9]{0,4}|00[1-9][0-9]{0,3}|000[1-9][0-9]{0,2}|0000[1-9][0-9]?"
    r"|00000[1-9])"
)
AMOUNT_PATTERN = rf"^-?(?:0|[1-9][0-9]{{0,11}}){FRACTION_RE}$"
"""Every amount :data:`Money` takes, as the OpenAPI documents state it: :data:`CANONICAL_AMOUNT`
with at most 12 digits before the point (18 digits, 6 of them decimals)."""


def amount_schema(pattern: str, rule: str) -> WithJsonSchema:
    """An amount's JSON schema: a string matching ``pattern`` (no JSON number: those are refused,
    :data:`NUMBER_HINT`), ``rule`` in words, so a client generated from the OpenAPI document
    sends only what the service accepts (issue 37: the spec says the truth)."""
    return WithJsonSchema(
        {
            "type": "string",
            "pattern": pattern,
            "maxLength": 20,
            "description": rule,
            "examples": ["0.900000"],
        }
    )


Money = Annotated[
    Decimal,
    BeforeValidator(canonical_amount),
    Field(max_digits=18, decimal_places=6, examples=["0.900000"]),
    PlainSerializer(money_str, return_type=str, when_used="json"),
    amount_schema(
        AMOUNT_PATTERN,
        "a decimal string: an optional '-', at most 12 digits before the point (no leading"
        " zeros), at most 6 after it",
    ),
]
"""The one money shape: a Decimal of at most six places in, a six-place string out (``"-0.900000"``).

Every amount the platform books leaves it in this shape: the REST bodies, the orchestration's round
summary, the demo's ``summary.json`` and the CLI's ``--json``. A request with a seventh decimal
place, an amount string that is not canonical (:data:`CANONICAL_AMOUNT`) or a JSON number is
refused (422, :data:`NUMBER_HINT`), never rounded or read loosely; a float computed inside the
platform becomes Money through :func:`money`.
"""

QuotedMoney = Annotated[
    Decimal,
    BeforeValidator(canonical_amount),
    Field(decimal_places=6, examples=["0.900000"]),
    PlainSerializer(money_str, return_type=str, when_used="json"),
]
"""A computed amount that no ledger books, of any size Decimal's 28 digits hold: the pricing
service's terms of a large market can exceed :data:`Money`'s 18 digits (the paper's SWAN quoted
4.6·10¹⁰⁷ for 1.2·10⁹ clients). Same wire
form (a six-place string), same refusal of JSON numbers."""


_DECIMAL_REPR = re.compile(r"Decimal\('([^']*)'\)")


def plain_rule(msg: str) -> str:
    """A validation message with every ``Decimal('1000000000')`` written as the amount a user
    types (``1000000000``; issue 40: limits stated in the user's units, not Python's repr)."""

    def plain(m: re.Match[str]) -> str:
        try:
            return format(Decimal(m.group(1)).normalize(), "f")
        except InvalidOperation:
            return m.group(1)

    return _DECIMAL_REPR.sub(plain, msg)
