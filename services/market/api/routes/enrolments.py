"""The operator's enrolments: attested types (D_i, C_i) with codes that devices redeem."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.api.base import MAX_ID
from mots.platform.api.market import EnrolmentIn, EnrolmentIssued, EnrolmentOut
from mots.platform.db import in_transaction
from mots.platform.money import from_micros, to_micros
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from services.market import enrolment
from services.market.api.deps import OperatorDep, SessionFactoryDep, SettingsDep
from services.market.errors import NotFound
from services.market.models import Enrolment

router = APIRouter(tags=["enrolments"])

EnrolmentId = Annotated[int, Path(ge=1, le=MAX_ID, description="the enrolment's id")]


def _out(e: Enrolment) -> EnrolmentOut:
    return EnrolmentOut(
        id=e.id,
        type_name=e.type_name,
        data_size=e.data_size,
        cost=from_micros(e.cost_micros),
        uses_left=e.uses_left,
        expires_at=e.expires_at,
        revoked=e.revoked,
        task=e.task,
    )


@router.post("/v1/enrolments", status_code=status.HTTP_201_CREATED, response_model=EnrolmentIssued)
def issue(
    body: EnrolmentIn, _: OperatorDep, factory: SessionFactoryDep, settings: SettingsDep
) -> EnrolmentIssued:
    """Attest a type and issue a code for ``uses`` registrations (the code is shown once)."""
    facts = enrolment.TypeFacts(body.type_name, body.data_size, to_micros(body.cost), body.task)

    def work(session: Session) -> EnrolmentIssued:
        row, code = enrolment.issue(session, facts, body.uses, body.ttl_s, settings.max_types)
        return EnrolmentIssued(**_out(row).model_dump(), code=code)

    return in_transaction(factory, work)


@router.get("/v1/enrolments", response_model=Page[EnrolmentOut])
def list_enrolments(
    _: OperatorDep, factory: SessionFactoryDep, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[EnrolmentOut]:
    """The enrolments in the order they were issued, without codes, a page at a time."""
    after = decode_cursor(cursor) or 0
    query = select(Enrolment).where(Enrolment.id > after).order_by(Enrolment.id).limit(limit + 1)
    with factory() as session:
        rows = [_out(e) for e in session.scalars(query)]
    return page_of(rows, limit, key=lambda e: e.id)


@router.delete("/v1/enrolments/{enrolment_id}", response_model=EnrolmentOut)
def revoke(enrolment_id: EnrolmentId, _: OperatorDep, factory: SessionFactoryDep) -> EnrolmentOut:
    """Revoke a code: no further registration redeems it (clients it enrolled stay)."""

    def work(session: Session) -> EnrolmentOut:
        row = session.get(Enrolment, enrolment_id, with_for_update=True)
        if row is None:
            raise NotFound("enrolment_id", f"enrolment {enrolment_id} does not exist")
        row.revoked = True
        return _out(row)

    return in_transaction(factory, work)
