"""A worker's publish rides out a Redis restart: a task's reply (its Celery ``link``) sent while
Redis is down for a second or two waits for it instead of failing, which would lose the reply
(the task cannot be given back to a queue that is down; the soak saw a training's reply lost so,
and the round settled by rule five minutes later)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kombu.exceptions import OperationalError

from mots.local.launcher import RedisServer
from mots.platform.celery_app import make_celery
from mots.platform.contracts import ORCHESTRATION_DECISIONS_COMPLETE, RoundRef, send
from mots.platform.settings import PlatformSettings
from mots.platform.worker import service_worker

PING = RoundRef(round_id=1)
"""A declared task's payload: what is sent does not matter here, only that it is published."""


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_workers_publish_waits_for_redis_to_come_back(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path)
    url = redis.start()
    try:
        app = service_worker("demo", PlatformSettings(redis_url=url, redis_key_prefix="t:"))
        send(app, ORCHESTRATION_DECISIONS_COMPLETE, PING)  # connected once
        redis.stop()
        threading.Timer(2.0, redis.start).start()
        started = time.monotonic()
        send(app, ORCHESTRATION_DECISIONS_COMPLETE, PING)
        assert 1.5 < time.monotonic() - started < 30
    finally:
        time.sleep(2.5)
        redis.stop()


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_apis_publish_fails_fast_when_redis_is_down(tmp_path: Path) -> None:
    """An API's send answers a request: it fails within a second (a 503), not after 30."""
    redis = RedisServer(tmp_path)
    url = redis.start()
    try:
        app = make_celery("demo", url, "t:")
        send(app, ORCHESTRATION_DECISIONS_COMPLETE, PING)
        redis.stop()
        started = time.monotonic()
        with pytest.raises(OperationalError):
            send(app, ORCHESTRATION_DECISIONS_COMPLETE, PING)
        assert time.monotonic() - started < 5
    finally:
        redis.stop()
