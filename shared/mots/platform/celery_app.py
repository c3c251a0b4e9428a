"""The Celery app factory and the cross-service call helper: JSON only, one queue per service.

Services never import one another; they call each other's tasks by name through Redis
(:func:`call`), with pydantic-validated JSON on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from celery import Celery
from pydantic import BaseModel

QUEUES = ("market", "pricing", "orchestration", "evaluation")
"""One queue per service; a task named ``<service>.<verb>`` is routed to ``<service>``."""

M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])


def task(app: Celery, name: str) -> Callable[[F], F]:
    """Register a function as task ``name`` of ``app`` and keep the function's own signature."""

    def register(fn: F) -> F:
        app.task(name=name)(fn)
        return fn

    return register


def make_celery(
    name: str, redis_url: str, key_prefix: str = "mots:", include: list[str] | None = None
) -> Celery:
    """A Celery app with Redis as broker and backend, JSON serialisation and name-based routing."""
    app = Celery(name, broker=redis_url, backend=redis_url, include=include or [])
    app.conf.update(
        broker_transport_options={"global_keyprefix": key_prefix},
        result_backend_transport_options={"global_keyprefix": key_prefix},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_routes={f"{q}.*": {"queue": q} for q in QUEUES},
        task_default_queue=name,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        result_expires=3600,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    return app


def call(
    app: Celery,
    task: str,
    payload: BaseModel | dict[str, Any],
    result_type: type[M],
    timeout_s: float,
) -> M:
    """Run another service's task and wait for its validated result (raises its error)."""
    body = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
    result = app.send_task(task, args=[body])
    value = result.get(timeout=timeout_s, disable_sync_subtasks=False)
    result.forget()
    return result_type.model_validate(value)


def send(app: Celery, task: str, payload: BaseModel | dict[str, Any], countdown: float = 0) -> None:
    """Fire-and-forget another service's task (an event)."""
    body = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
    app.send_task(task, args=[body], countdown=countdown or None, ignore_result=True)
