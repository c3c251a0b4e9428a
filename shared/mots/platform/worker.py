"""What every service's Celery worker shares: its app, its start-up and its shut-down.

A worker module is then declarative: ``app = service_worker("market", settings, migrate=...)``
followed by its handlers, each registered through its contract (``@MARKET_SETTLE_ROUND.handler(app)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery, signals

from mots.platform.celery_app import make_celery
from mots.platform.metrics import TASKS, serve_worker_metrics
from mots.platform.settings import PlatformSettings


def declare_tasks(app: Celery) -> None:
    """Export ``mots_tasks_total`` at 0 for each task this worker runs, both outcomes, before
    its first run (``rate()`` cannot count the run that would create the series)."""
    from mots.platform.contracts import ALL_TASKS

    for spec in ALL_TASKS:
        if spec.name in app.tasks:
            for outcome in ("ok", "error"):
                TASKS.labels(spec.queue, spec.verb, outcome)


WORKER_PUBLISH_RETRY_S = 30.0
"""How long a worker's publish (a step's call, a task's reply) waits for Redis to come back: a
restart takes seconds, and a reply that fails to publish is lost (its task cannot be given back to
a queue that is down, so the round would wait for the call's timeout)."""


def service_worker(
    service: str,
    settings: PlatformSettings,
    migrate: Callable[[], None] | None = None,
    on_ready: Callable[[], object] | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> Celery:
    """The Celery app of ``service``'s worker. When the worker is ready it runs ``migrate`` (the
    service's Alembic upgrade), serves ``/metrics`` on ``MOTS_METRICS_PORT`` and calls ``on_ready``
    (say, re-enqueueing unfinished work); ``on_shutdown`` runs when it stops."""
    app = make_celery(
        service,
        settings.redis_url,
        settings.redis_key_prefix,
        visibility_timeout_s=settings.broker_visibility_timeout_s,
        publish_retry_s=WORKER_PUBLISH_RETRY_S,
    )

    def ready(**_: Any) -> None:
        if migrate is not None:
            migrate()
        declare_tasks(app)
        serve_worker_metrics(settings.metrics_port, settings.metrics_host)
        if on_ready is not None:
            on_ready()

    def shutdown(**_: Any) -> None:
        if on_shutdown is not None:
            on_shutdown()

    # Celery's signals are process-wide; a worker process runs one service's app.
    signals.worker_ready.connect(ready, weak=False)
    signals.worker_shutdown.connect(shutdown, weak=False)
    return app
