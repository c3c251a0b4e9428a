"""Idempotency keys for money-moving calls: same key and body → the stored result, no second entry.

The key row is inserted in the same database transaction as the money movement, and the pair
(principal, key) is unique, so of two concurrent calls with one key only one books; the other
retries and returns the stored result. The same key with a different body is a :class:`~services.market.errors.Conflict` (409).
Only successful outcomes are stored: a refused call (e.g. 402) may be retried with the same key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.orm import Session

from services.market.errors import Conflict
from services.market.models import Base, IdempotencyKey


def request_hash(method: str, path: str, body: dict[str, Any]) -> str:
    """A fingerprint of a request: method, path and canonical JSON body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method} {path} {canonical}".encode()).hexdigest()


_KEYS = Base.metadata.tables[IdempotencyKey.__tablename__]
_LOOKUP = select(_KEYS.c.request_hash, _KEYS.c.status_code, _KEYS.c.response_json).where(
    _KEYS.c.principal == bindparam("principal"), _KEYS.c.key == bindparam("key")
)
_STORE = insert(_KEYS)


def _stored(
    session: Session, principal: str, key: str, fingerprint: str
) -> tuple[int, dict[str, Any]] | None:
    """The stored outcome for (principal, key); Conflict if the key was used with another body."""
    stored = session.connection().execute(_LOOKUP, {"principal": principal, "key": key}).first()
    if stored is None:
        return None
    if stored.request_hash != fingerprint:
        raise Conflict("Idempotency-Key", "this key was used with a different request body")
    return stored.status_code, json.loads(stored.response_json)


def run_once(
    session: Session,
    principal: str,
    key: str,
    fingerprint: str,
    action: Callable[[Session], dict[str, Any]],
    status_code: int = 201,
) -> tuple[int, dict[str, Any]]:
    """The stored outcome for (principal, key), or run ``action`` and store its JSON result."""
    replay = _stored(session, principal, key, fingerprint)
    if replay is not None:
        return replay
    try:
        result = action(session)
    except Conflict:
        # A concurrent call with this key may have committed while we waited for a lock, and its
        # effect (e.g. "already bought") is what refused us: answer with its stored result.
        replay = _stored(session, principal, key, fingerprint)
        if replay is None:
            raise
        return replay
    session.connection().execute(
        _STORE,
        {
            "principal": principal,
            "key": key,
            "request_hash": fingerprint,
            "status_code": status_code,
            "response_json": json.dumps(result, default=str),
        },
    )
    return status_code, result
