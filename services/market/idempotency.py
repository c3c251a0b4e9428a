"""Idempotency keys for money-moving calls: same key and body → the stored result, no second entry.

One mechanism for every money-moving call, one request (:func:`run_once`, deposits) or a batch
(:func:`services.market.purchases.decide`): the stored keys are read with :func:`stored_keys`,
a stored key answers with :func:`replayed`, and a booked call's result is stored as
:func:`key_row` in the same database transaction as the money movement. The pair (principal,
key) is unique, so of two concurrent calls with one key only one books; the other retries and
returns the stored result. The same key with a different body is a
:class:`~services.market.errors.Conflict` (409). Only successful outcomes are stored: a refused
call (e.g. 402) may be retried with the same key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Select, insert, select
from sqlalchemy.orm import Session

from mots.platform.db import one_of, one_of_select
from services.market.errors import Conflict
from services.market.models import Base, IdempotencyKey

KEYS = Base.metadata.tables[IdempotencyKey.__tablename__]
_STORE = insert(KEYS)

REPLAYED_HEADER = "Idempotent-Replayed"
"""The response header (``true``) of an answer replayed from a stored key, nothing booked again."""

Stored = tuple[str, int, str]
"""A stored key's (request hash, status code, response JSON)."""


def request_hash(method: str, path: str, body: dict[str, Any]) -> str:
    """A fingerprint of a request: method, path and canonical JSON body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method} {path} {canonical}".encode()).hexdigest()


def stored_keys(dialect: str, principals: Select[Any] | None = None) -> Select[Any]:
    """Every stored key among the ``keys`` (a list parameter) of the ``principals``: a one-column
    query, or else the list parameter ``principals``. A superset of the pairs asked for (looked
    up by pair afterwards), so that both columns take one list each."""
    principal = (
        one_of(KEYS.c.principal, "principals", dialect)
        if principals is None
        else one_of_select(KEYS.c.principal, principals, dialect)
    )
    return select(
        KEYS.c.principal, KEYS.c.key, KEYS.c.request_hash, KEYS.c.status_code, KEYS.c.response_json
    ).where(one_of(KEYS.c.key, "keys", dialect), principal)


@lru_cache(maxsize=4)
def _one_key(dialect: str) -> Select[Any]:
    return stored_keys(dialect)


def key_reused() -> Conflict:
    """The refusal of a key used before with another request body."""
    return Conflict("Idempotency-Key", "this key was used with a different request body")


def replayed(stored: Stored, fingerprint: str) -> tuple[int, dict[str, Any]] | Conflict:
    """A call's answer from its key's ``stored`` result: that result if the bodies match."""
    request_hash_, code, body = stored
    if request_hash_ != fingerprint:
        return key_reused()
    return code, json.loads(body)


def key_row(
    principal: str,
    key: str,
    fingerprint: str,
    status_code: int,
    result: dict[str, Any],
    now: datetime | None = None,
) -> dict[str, Any]:
    """The row storing a booked call's result under its key."""
    return {
        "principal": principal,
        "key": key,
        "request_hash": fingerprint,
        "status_code": status_code,
        "response_json": json.dumps(result, default=str),
        "created_at": now or datetime.now(UTC),
    }


def _replay(
    session: Session, principal: str, key: str, fingerprint: str
) -> tuple[int, dict[str, Any]] | None:
    """The stored outcome for (principal, key); Conflict if the key was used with another body."""
    conn = session.connection()
    found = conn.execute(
        _one_key(conn.dialect.name), {"principals": [principal], "keys": [key]}
    ).first()
    if found is None:
        return None
    answer = replayed((found[2], found[3], found[4]), fingerprint)
    if isinstance(answer, Conflict):
        raise answer
    return answer


def run_once(
    session: Session,
    principal: str,
    key: str,
    fingerprint: str,
    action: Callable[[Session], dict[str, Any]],
    status_code: int = 201,
) -> tuple[int, dict[str, Any]]:
    """The stored outcome for (principal, key), or run ``action`` and store its JSON result."""
    replay = _replay(session, principal, key, fingerprint)
    if replay is not None:
        return replay
    try:
        result = action(session)
    except Conflict:
        # A concurrent call with this key may have committed while we waited for a lock, and its
        # effect (e.g. "already bought") is what refused us: answer with its stored result.
        replay = _replay(session, principal, key, fingerprint)
        if replay is None:
            raise
        return replay
    session.connection().execute(_STORE, key_row(principal, key, fingerprint, status_code, result))
    return status_code, result
