"""Attested types: the operator enrols devices into a type (D_i, C_i); a client gets that type.

A client's type is what the operator attested, not what it claims: the operator issues an
enrolment code for a type (with a number of uses and an expiry; only the code's SHA-256 is
stored), and a device redeems it at registration. Without a code, only the operator's token or
open self-registration (``MOTS_OPEN_REGISTRATION``: bounded, rate-limited, ``pending`` until the
operator approves) registers a client. Every client and live enrolment of one type declares the
same (D_i, C_i), and the market accepts at most ``MOTS_MAX_TYPES`` distinct types.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mots.platform.money import from_micros
from services.market import tasks
from services.market.auth import hash_token
from services.market.errors import BadEnrolmentCode, Conflict
from services.market.models import DEFAULT_TASK, Client, Enrolment

CODE_PREFIX = "enrol_"
LIVE_CLIENT_STATES = ("active", "pending")


@dataclass(frozen=True, slots=True)
class TypeFacts:
    """A type's label, data size D_i and cost C_i (micro-units)."""

    type_name: str
    data_size: int
    cost_micros: int
    task: str = DEFAULT_TASK
    """The task the type belongs to: each task has its own types (issue 36)."""


def new_code() -> str:
    """A fresh enrolment code (256 random bits)."""
    return CODE_PREFIX + secrets.token_urlsafe(32)


def _known_facts(
    session: Session, type_name: str, now: int, task: str = DEFAULT_TASK
) -> TypeFacts | None:
    """The type's (D_i, C_i) in ``task`` as a live client or live enrolment of it declares it."""
    row = session.execute(
        select(Client.data_size, Client.cost_micros)
        .where(
            Client.type_name == type_name,
            Client.status.in_(LIVE_CLIENT_STATES),
            Client.task == task,
        )
        .limit(1)
    ).first()
    if row is None:
        row = session.execute(
            select(Enrolment.data_size, Enrolment.cost_micros)
            .where(
                Enrolment.type_name == type_name,
                Enrolment.task == task,
                Enrolment.revoked.is_(False),
                Enrolment.expires_at > now,
            )
            .limit(1)
        ).first()
    return None if row is None else TypeFacts(type_name, row[0], row[1], task)


def _type_count(session: Session, now: int) -> int:
    """Distinct types among live clients and live enrolments."""
    names = set(
        session.scalars(
            select(Client.type_name).where(Client.status.in_(LIVE_CLIENT_STATES)).distinct()
        )
    )
    names.update(
        session.scalars(
            select(Enrolment.type_name)
            .where(Enrolment.revoked.is_(False), Enrolment.expires_at > now)
            .distinct()
        )
    )
    return len(names)


def check_type(session: Session, facts: TypeFacts, max_types: int, now: int) -> bool:
    """Refuse a type whose (D_i, C_i) differs from its live declaration, or one type too many;
    whether the type was already live (only a new type counts the market's types)."""
    known = _known_facts(session, facts.type_name, now, facts.task)
    if known is None:
        if _type_count(session, now) >= max_types:
            raise Conflict(
                "type_name",
                f"the market already has {max_types} distinct types (MOTS_MAX_TYPES); "
                "register with an existing type",
            )
        return False
    if (known.data_size, known.cost_micros) != (facts.data_size, facts.cost_micros):
        raise Conflict(
            "type_name",
            f"type {facts.type_name!r} is attested with data_size={known.data_size} and "
            f"cost={from_micros(known.cost_micros)}; a type's clients must match",
        )
    return True


def issue(
    session: Session, facts: TypeFacts, uses: int, ttl_s: int, max_types: int
) -> tuple[Enrolment, str]:
    """A new enrolment for ``facts`` and its code (shown once)."""
    now = int(time.time())
    tasks.check_open(session, facts.task)
    check_type(session, facts, max_types, now)
    code = new_code()
    row = Enrolment(
        code_hash=hash_token(code),
        type_name=facts.type_name,
        data_size=facts.data_size,
        cost_micros=facts.cost_micros,
        uses_left=uses,
        expires_at=now + ttl_s,
        revoked=False,
        task=facts.task,
    )
    session.add(row)
    session.flush()
    return row, code


def claim_conflict(
    facts: TypeFacts, type_name: str | None, data_size: int | None, cost_micros: int | None
) -> Conflict | None:
    """The refusal (409) of a registration whose claimed type fields differ from the type its
    enrolment code attests (a field not claimed is the code's), else None (pure)."""
    claims = {
        "type_name": (type_name, facts.type_name),
        "data_size": (data_size, facts.data_size),
        "cost": (cost_micros, facts.cost_micros),
    }
    for field, (claim, attested) in claims.items():
        if claim is not None and claim != attested:
            return Conflict(
                field,
                f"the enrolment code attests type {facts.type_name!r} with data_size="
                f"{facts.data_size} and cost={from_micros(facts.cost_micros)}; the type is the "
                "operator's, not the client's",
            )
    return None


def redeem(session: Session, code: str) -> Enrolment:
    """Use one of the code's registrations (atomic: concurrent redemptions never overdraw it).

    An unknown, expired, revoked or used-up code is a bad credential: 401.
    """
    now = int(time.time())
    digest = hash_token(code)
    taken = session.execute(
        update(Enrolment)
        .where(
            Enrolment.code_hash == digest,
            Enrolment.uses_left > 0,
            Enrolment.revoked.is_(False),
            Enrolment.expires_at > now,
        )
        .values(uses_left=Enrolment.uses_left - 1)
    )
    if getattr(taken, "rowcount", 0) != 1:
        raise BadEnrolmentCode(
            "enrolment_code", "unknown, expired, revoked or used up; ask the operator for a code"
        )
    row = session.scalar(select(Enrolment).where(Enrolment.code_hash == digest))
    assert row is not None
    return row
