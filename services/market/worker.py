"""The market's Celery worker: the round operations the orchestration service calls by name.

Run with ``celery -A services.market.worker worker -Q market --pool=solo``.
"""

from __future__ import annotations

from typing import Any

from celery import signals

from mots.platform.celery_app import make_celery, task
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.metrics import TASKS, serve_worker_metrics
from mots.platform.schemas import OpenRoundPayload, SettlePayload
from mots.platform.transactions import in_transaction
from services.market import rounds
from services.market.core.config import get_settings
from services.market.migrations import upgrade

settings = get_settings()
app = make_celery("market", settings.redis_url, settings.redis_key_prefix)
_sessions = make_sessionmaker(make_engine(settings.database_url, settings.db_pool_size))


def _on_ready(**_: Any) -> None:
    upgrade(settings.database_url)
    serve_worker_metrics(settings.metrics_port)


signals.worker_ready.connect(_on_ready, weak=False)


def _counted(name: str, outcome: str) -> None:
    TASKS.labels("market", name, outcome).inc()


@task(app, "market.population")
def population(_: dict[str, Any] | None = None) -> dict[str, Any]:
    """The registered population grouped by type."""
    with _sessions() as session:
        out = rounds.population(session).model_dump(mode="json")
    _counted("population", "ok")
    return out


@task(app, "market.open_round")
def open_round(payload: dict[str, Any]) -> dict[str, Any]:
    """Publish a round's quote; the market starts collecting decisions."""
    quote = OpenRoundPayload.model_validate(payload)
    rnd = in_transaction(_sessions, lambda s: rounds.open_round(s, quote))
    _counted("open_round", "ok")
    return {"round_id": rnd.id, "state": rnd.state}


@task(app, "market.decisions")
def decisions(payload: dict[str, Any]) -> dict[str, Any]:
    """The decisions declared so far in a round."""
    with _sessions() as session:
        out = rounds.decisions(session, int(payload["round_id"])).model_dump(mode="json")
    _counted("decisions", "ok")
    return out


@task(app, "market.close_round")
def close_round(payload: dict[str, Any]) -> dict[str, Any]:
    """Stop taking decisions and purchases; return the final decisions."""
    out = in_transaction(_sessions, lambda s: rounds.close_round(s, int(payload["round_id"])))
    _counted("close_round", "ok")
    return out.model_dump(mode="json")


@task(app, "market.settle_round")
def settle_round(payload: dict[str, Any]) -> dict[str, Any]:
    """Book the round's rewards, charges, refunds, subsidy and surplus (idempotent)."""
    body = SettlePayload.model_validate(payload)
    out = in_transaction(_sessions, lambda s: rounds.settle_round(s, body))
    _counted("settle_round", "ok")
    return out.model_dump(mode="json")


@task(app, "market.publish")
def publish(payload: dict[str, Any]) -> dict[str, Any]:
    """Make a settled round's model downloadable."""
    rnd = in_transaction(_sessions, lambda s: rounds.publish(s, int(payload["round_id"])))
    _counted("publish", "ok")
    return {"round_id": rnd.id, "state": rnd.state}
