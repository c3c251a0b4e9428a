"""What every service's FastAPI app has in common: the liveness route and the lazily built app.

Each service module exposes ``create_app()``; uvicorn's import string ``services.<name>.main:app``
reads ``app``, which is built on first access so that importing the module (tests, Celery
workers, schema dumps) does not read settings or open database pools.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from fastapi import FastAPI


def install_healthz(app: FastAPI) -> None:
    """Add ``GET /healthz``, the liveness probe of Docker's HEALTHCHECK and k8s' probes."""

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """Liveness probe (async: answered on the event loop, no thread hop)."""
        return {"status": "ok"}


def lazy_app(
    namespace: MutableMapping[str, Any], create_app: Callable[[], FastAPI]
) -> Callable[[str], FastAPI]:
    """A module ``__getattr__`` that builds ``app`` with ``create_app`` on first access.

    The app is stored in ``namespace`` (the module's ``globals()``), so it is built once and
    later reads do not come back here. Any other missing name raises ``AttributeError``.
    """

    def __getattr__(name: str) -> FastAPI:
        if name != "app":
            raise AttributeError(name)
        application = create_app()
        namespace["app"] = application
        return application

    return __getattr__
