"""The tasks the market stores (issue 36): created from a task file's content, listed, shown by
name (the latest version, or a given one), versioned and retired.

A task file is validated whole before anything is written (:func:`mots.tasks.task_file.parse_task_text`),
so a malformed one stores nothing. A new version of a task must number above every stored one;
retiring a task retires its every version, and a later version brings it back. Rows of other
tables name their task by name (``fashion-mnist`` for everything stored before tasks, which needs
no row here: :func:`check_open` accepts it unless the operator stored and retired it).
"""

from __future__ import annotations

import json

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from mots.platform.api.tasks import TaskOut, TaskStatus
from mots.tasks.task_file import MarketTask, parse_task_text
from services.market.errors import Conflict, NotFound, Refusal
from services.market.models import DEFAULT_TASK, Task


def out(row: Task) -> TaskOut:
    """A stored task as the API shows it."""
    spec = json.loads(row.spec_json)
    return TaskOut(
        name=row.name,
        version=row.version,
        status=TaskStatus(row.status),
        description=str(spec.get("description", "")),
        created_at=row.created_at,
        spec=spec,
        content=row.content,
    )


def latest(session: Session, name: str) -> Task | None:
    """The task's highest stored version, if any."""
    return session.scalar(
        select(Task).where(Task.name == name).order_by(Task.version.desc()).limit(1)
    )


def create(session: Session, content: str) -> Task:
    """Store the task ``content`` declares (a :class:`~mots.tasks.task_file.TaskFileError`
    listing every problem if it is malformed; a 409 if its version is not above the stored ones).
    """
    task: MarketTask = parse_task_text(content, "content")
    top = session.scalar(select(func.max(Task.version)).where(Task.name == task.name))
    if top is not None and task.version <= top:
        raise Conflict(
            "version",
            f"task {task.name!r} is stored at version {top}; a new version must be above it",
        )
    if top is not None:  # a new version brings a retired task back
        session.execute(update(Task).where(Task.name == task.name).values(status="active"))
    row = Task(
        name=task.name,
        version=task.version,
        status=TaskStatus.ACTIVE.value,
        content=content,
        spec_json=task.model_dump_json(),
    )
    session.add(row)
    session.flush()
    return row


def show(session: Session, name: str, version: int | None = None) -> Task:
    """The task's latest version (or ``version``); 404 if not stored."""
    if version is None:
        row = latest(session, name)
    else:
        row = session.scalar(select(Task).where(Task.name == name, Task.version == version))
    if row is None:
        which = f"task {name!r}" + ("" if version is None else f" version {version}")
        raise NotFound("name", f"{which} is not stored (GET /v1/tasks lists the tasks)")
    return row


def retire(session: Session, name: str) -> Task:
    """Retire every version of the task: no new enrolment codes or rounds for it (its clients,
    rounds, models and the money they moved stay). Returns the latest version."""
    row = show(session, name)
    session.execute(update(Task).where(Task.name == name).values(status="retired"))
    session.flush()
    session.refresh(row)
    return row


def refusal(session: Session, name: str) -> str | None:
    """Why a round may not open for task ``name`` (:func:`check_open`'s detail), or None."""
    try:
        check_open(session, name)
    except Refusal as refused:
        return refused.detail
    return None


def check_open(session: Session, name: str, field: str = "task") -> None:
    """``name`` is a task new enrolment codes, registrations and rounds may name: stored and not
    retired, or the default task (``fashion-mnist``) unless stored and retired. 404 or 409."""
    row = latest(session, name)
    if row is None and name != DEFAULT_TASK:
        raise NotFound(field, f"task {name!r} is not stored (POST /v1/tasks creates it)")
    if row is not None and row.status == TaskStatus.RETIRED:
        raise Conflict(field, f"task {name!r} is retired; it takes no new enrolments or rounds")
