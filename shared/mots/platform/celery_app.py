"""The Celery app factory: Redis as broker and backend, JSON only, one queue per service.

Services never import one another; they call each other's tasks through the declarations of
:mod:`mots.platform.contracts`, which also give every task its queue.
"""

from __future__ import annotations

import math

from celery import Celery

from mots.platform.contracts import ALL_TASKS

QUEUES = ("market", "orchestration", "evaluation", "training")
"""One queue per service with a worker (and the orchestration's training worker); a task named
``<queue>.<verb>`` is routed to ``<queue>``. Pricing has none: its API alone (a round prices in
process, :mod:`mots.platform.quotes`)."""


def make_celery(
    name: str,
    redis_url: str,
    key_prefix: str = "mots:",
    include: list[str] | None = None,
    visibility_timeout_s: float = 3600.0,
    publish_retry_s: float = 0.0,
) -> Celery:
    """A Celery app with Redis as broker and backend, JSON serialisation and the contracts' routes.

    Tasks are acknowledged after they ran (``task_acks_late``) and given back to the queue when
    their worker dies (``task_reject_on_worker_lost``): every handler is idempotent, so a task
    that runs twice does no harm, and one whose worker was killed is not lost. Redis hands an
    unacknowledged task to another worker after ``visibility_timeout_s``, which must exceed the
    longest task (else a task still running would be run a second time in parallel).

    ``publish_retry_s`` > 0: a publish retries every half second for about that long while the
    broker is away (a worker's: a task's reply sent during a Redis restart arrives once Redis is
    back); 0 keeps Celery's own policy, which gives up within half a second (an API's: a request
    is answered 503 rather than held)."""
    app = Celery(name, broker=redis_url, backend=redis_url, include=include or [])
    app.conf.update(
        broker_transport_options={
            "global_keyprefix": key_prefix,
            "visibility_timeout": visibility_timeout_s,
        },
        result_backend_transport_options={"global_keyprefix": key_prefix},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_routes={spec.name: {"queue": spec.queue} for spec in ALL_TASKS},
        task_default_queue=name,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        result_expires=3600,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    if publish_retry_s > 0:
        app.conf.task_publish_retry_policy = {
            "max_retries": math.ceil(publish_retry_s / 0.5) + 1,
            "interval_start": 0,
            "interval_step": 0.5,
            "interval_max": 0.5,
        }
    return app
