"""Cursor pagination, the same on every list route: ``?limit=&cursor=`` in, ``{"items", "next"}`` out.

A page holds at most ``limit`` items (1 to :data:`MAX_LIMIT`; beyond is a 422 naming
``query.limit``). ``next`` is an opaque cursor for the page after this one, or ``null`` on the last
page; a client passes it back unchanged as ``cursor``. Pages are keyset pages (the cursor holds the
last id shown), so rows added while a client pages never make it skip or repeat one. A cursor that
was not made here (one holding an id beyond a signed 64-bit integer among them) is a 422
naming ``query.cursor``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Annotated, TypeVar

from fastapi import HTTPException, Query, status

from mots.platform.api.base import Page as Page

T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
"""Largest page a list route answers."""
_PREFIX = "after:"
MAX_CURSOR_ID = 2**63 - 1
"""Largest id a cursor may hold: a signed 64-bit integer, the widest id column (both databases)."""

Limit = Annotated[
    int,
    Query(ge=1, le=MAX_LIMIT, description=f"items per page (1 to {MAX_LIMIT})", examples=[50]),
]
_LEAD = "(?:[MN][DTjz]|O[DT])"  # the first two base64 characters of an ASCII digit's byte
_THREE_DIGITS = f"{_LEAD}[AEIMQUYcgk][w-z0-5]"
CURSOR_PATTERN = (
    f"^YWZ0ZXI6(?:{_THREE_DIGITS}){{0,5}}(?:{_THREE_DIGITS}|{_LEAD}[AEIMQUYcgk]|[MN][AQgw]|O[AQ])$"
)
"""Every cursor :func:`encode_cursor` makes, as the OpenAPI documents state it: unpadded URL-safe
base64 of ``after:`` (``YWZ0ZXI6``) and 1 to 18 ASCII digits, character by character (a group of
three digits encodes as four characters, a last one or two as two or three). Each such cursor is
accepted (it pages after the id it holds); 18 digits keep every id inside a signed 64-bit
integer, as :data:`MAX_CURSOR_ID` does, and far beyond any id the services hand out."""
Cursor = Annotated[
    str | None,
    Query(
        max_length=32,
        pattern=CURSOR_PATTERN,
        description="the `next` of the previous page, passed back unchanged; absent: the first page",
        examples=["YWZ0ZXI6NDI"],
    ),
]


def encode_cursor(last_id: int) -> str:
    """The opaque cursor of the page after the one ending at ``last_id``."""
    return base64.urlsafe_b64encode(f"{_PREFIX}{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    """The id the page of ``cursor`` continues after (None: the first page); 422 if not ours."""
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        if not text.startswith(_PREFIX):
            raise ValueError(text)
        digits = text.removeprefix(_PREFIX)
        if not (digits.isascii() and digits.isdigit()) or int(digits) > MAX_CURSOR_ID:
            raise ValueError(text)
        last_id = int(digits)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            "query.cursor: not a cursor this list returned (pass `next` back unchanged)",
        ) from None
    return last_id


def page_of(rows: Sequence[T], limit: int, key: Callable[[T], int]) -> Page[T]:
    """The page of ``rows`` fetched with ``limit + 1``: the extra row only says a next page exists."""
    items = list(rows[:limit])
    more = len(rows) > limit
    return Page[T](items=items, next=encode_cursor(key(items[-1])) if more and items else None)
