"""The market's enrolment bodies (``/v1/enrolments``): the operator attests a type of a task
(label, D_i, C_i) and issues a code that devices redeem at registration (re-exported by
:mod:`mots.platform.api.market`, where they lived until it reached the 600-line cap)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from mots.platform.api.base import BoundedMoney, Schema, TypeName, example
from mots.platform.api.tasks import DEFAULT_TASK, OfTask, TaskName
from mots.platform.money import Money
from mots.platform.timestamps import Timestamp

MAX_ENROLMENT_USES = 100_000
MAX_ENROLMENT_TTL_S = 366 * 86_400


ENROLMENT_EXAMPLE: dict[str, Any] = {
    "id": 2,
    "type_name": "type-1",
    "data_size": 50,
    "cost": "0.500000",
    "uses_left": 9,
    "expires_at": "2026-11-26T16:05:05Z",
    "revoked": False,
    "task": "digits",
}


class EnrolmentIn(Schema):
    """An attested type the operator enrols devices into: label, D_i, C_i, uses and lifetime."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"type_name": "type-1", "data_size": 50, "cost": "0.500000", "uses": 10},
                {  # devices of another task (issue 36): `mots market enrol --task digits`
                    "type_name": "type-1",
                    "data_size": 20,
                    "cost": "0.200000",
                    "uses": 10,
                    "ttl_s": 604800,
                    "task": "digits",
                },
            ]
        }
    )

    type_name: TypeName
    data_size: int = Field(..., ge=1, le=10_000_000, description="D_i the operator attests")
    cost: BoundedMoney = Field(..., description="C_i the operator attests")
    uses: int = Field(1, ge=1, le=MAX_ENROLMENT_USES, description="registrations the code admits")
    ttl_s: int = Field(
        7 * 86_400, ge=60, le=MAX_ENROLMENT_TTL_S, description="seconds until the code expires"
    )
    task: TaskName = Field(DEFAULT_TASK, description="the task the code enrols devices into")


class EnrolmentOut(OfTask):
    """An enrolment as the operator lists it (never its code)."""

    model_config = example(ENROLMENT_EXAMPLE)

    id: int
    type_name: str
    data_size: int
    cost: Money
    uses_left: int
    expires_at: Timestamp = Field(..., description="after this the code is refused (RFC 3339)")
    revoked: bool


class EnrolmentIssued(EnrolmentOut):
    """A new enrolment with its code: shown once, stored only as a hash."""

    model_config = example(ENROLMENT_EXAMPLE | {"code": "enr_4Q8vN2kLx7RtY1cW9bZs3mHd"})

    code: str
