"""One time format on every API: RFC 3339 in UTC with ``Z`` (``"2026-11-26T16:20:05Z"``).

:data:`Timestamp` is the type of every instant a service answers with: a ``datetime`` in UTC that
leaves as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (fractions only when there are any). What builds one
inside the platform may hand it epoch seconds (a token's expiry), a naive ``datetime`` (SQLite
returns its timestamps without a zone; they are UTC, as every service writes them) or one with
any offset: each becomes the same instant in UTC. :data:`TimestampIn` is the stricter type of an
instant a request gives: RFC 3339 with ``Z`` or an offset, never a bare number or a naive time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, PlainSerializer
from pydantic_core import PydanticCustomError


def utc(value: datetime) -> datetime:
    """The same instant in UTC (a naive ``datetime`` is taken to be UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def rfc3339(value: datetime) -> str:
    """The wire form of an instant: RFC 3339 in UTC ending in ``Z``."""
    return utc(value).isoformat().replace("+00:00", "Z")


def _epoch(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    return value


Timestamp = Annotated[
    datetime,
    BeforeValidator(_epoch),
    AfterValidator(utc),
    PlainSerializer(rfc3339, return_type=str, when_used="json"),
]
"""An instant as every API answers it: RFC 3339 in UTC with ``Z``."""

TIME_HINT = 'a time is RFC 3339 with a zone, e.g. "2026-11-26T16:20:05Z"'


def _zoned(value: Any) -> Any:
    if isinstance(value, (bool, int, float)):
        raise PydanticCustomError("time_format", TIME_HINT + " (not a number of seconds)")
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError:
            raise PydanticCustomError("time_format", TIME_HINT) from None
        if parsed.tzinfo is None:
            raise PydanticCustomError("time_format", TIME_HINT + " (this one has no zone)")
        return parsed
    return value


TimestampIn = Annotated[
    datetime,
    BeforeValidator(_zoned),
    AfterValidator(utc),
    PlainSerializer(rfc3339, return_type=str, when_used="json"),
]
"""An instant a request gives: RFC 3339 with ``Z`` or an offset (read as UTC); numbers and naive
times are refused in one line naming the field."""
