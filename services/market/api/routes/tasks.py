"""The tasks the market trains and sells (issue 36): the operator creates (a task file's content),
versions and retires them; the operator and every client list and read them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, status
from fastapi.responses import Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mots.platform.api.base import MAX_ID
from mots.platform.api.tasks import TASK_NAME_PATTERN, TaskIn, TaskOut, TaskVersions
from mots.platform.db import in_transaction
from mots.platform.deps import PrincipalDep
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from mots.platform.problems import FieldProblem, problems, validation_problem
from mots.tasks.task_file import TaskFileError
from services.market import tasks
from services.market.api.deps import OperatorDep, SessionFactoryDep
from services.market.models import Task

router = APIRouter(tags=["tasks"])

TaskNamePath = Annotated[
    str, Path(max_length=63, pattern=TASK_NAME_PATTERN, description="the task's name")
]
VersionQuery = Annotated[
    int | None, Query(ge=1, le=MAX_ID, description="a stored version (absent: the latest)")
]


def _refusal(err: TaskFileError) -> Response:
    """The 422 listing every problem of a task file, each under ``body.content.<field>``."""
    found = []
    for field, rule in err.fields:
        path = [p for p in field.split(".") if p and not p.startswith("(")]
        loc: list[int | str] = ["body", "content", *path]
        found.append(
            FieldProblem(field=".".join(map(str, loc)), loc=loc, msg=rule, type="task_file")
        )
    return validation_problem(found)


@router.post(
    "/v1/tasks",
    status_code=status.HTTP_201_CREATED,
    response_model=TaskOut,
    responses=problems(409, 422),
)
def create_task(body: TaskIn, _: OperatorDep, factory: SessionFactoryDep) -> TaskOut | Response:
    """(operator) Store a task, or a new version of one, from its task file's content; a
    malformed file is refused (422) with every problem listed by field, and nothing is stored;
    a version not above the stored ones is a 409."""
    try:
        return in_transaction(factory, lambda s: tasks.out(tasks.create(s, body.content)))
    except TaskFileError as err:
        return _refusal(err)


@router.get("/v1/tasks", response_model=Page[TaskOut])
def list_tasks(
    _: PrincipalDep, factory: SessionFactoryDep, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[TaskOut]:
    """Every stored task at its latest version (retired ones too), in the order they were first
    created, a page at a time."""
    after = decode_cursor(cursor) or 0
    first = select(Task.name, func.min(Task.id).label("first_id")).group_by(Task.name).subquery()
    query = (
        select(first.c.first_id, first.c.name)
        .where(first.c.first_id > after)
        .order_by(first.c.first_id)
        .limit(limit + 1)
    )
    with factory() as session:
        found = [(fid, name) for fid, name in session.execute(query)]
        rows = [(fid, tasks.out(tasks.show(session, name))) for fid, name in found]
    page = page_of(rows, limit, key=lambda r: r[0])
    return Page[TaskOut](items=[t for _, t in page.items], next=page.next)


@router.get("/v1/tasks/{name}", response_model=TaskOut, responses=problems(404))
def show_task(
    name: TaskNamePath, _: PrincipalDep, factory: SessionFactoryDep, version: VersionQuery = None
) -> TaskOut:
    """A task: its latest version, or ``?version=N``."""
    with factory() as session:
        return tasks.out(tasks.show(session, name, version))


@router.get("/v1/tasks/{name}/versions", response_model=TaskVersions, responses=problems(404))
def task_versions(name: TaskNamePath, _: PrincipalDep, factory: SessionFactoryDep) -> TaskVersions:
    """Every stored version of a task, oldest first."""
    with factory() as session:
        tasks.show(session, name)  # 404 if none
        rows = session.scalars(select(Task).where(Task.name == name).order_by(Task.version))
        return TaskVersions(versions=[tasks.out(r) for r in rows])


@router.delete("/v1/tasks/{name}", response_model=TaskOut, responses=problems(404))
def retire_task(name: TaskNamePath, _: OperatorDep, factory: SessionFactoryDep) -> TaskOut:
    """(operator) Retire a task (every version): no new enrolment codes or rounds name it; its
    clients, rounds, models and money stay. Creating a higher version brings it back."""

    def work(session: Session) -> TaskOut:
        return tasks.out(tasks.retire(session, name))

    return in_transaction(factory, work)
