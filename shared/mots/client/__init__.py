"""The platform's client SDK: the market's REST API as Python calls, and a client's answer to a quote.

::

    from mots.client import MarketClient
    from mots.platform.api import ClientRegistration

    with MarketClient("http://127.0.0.1:8000") as market:
        # the code the operator issued for this device's type (POST /v1/enrolments)
        me = market.register(ClientRegistration(name="pi-1", enrolment_code=code))
        mine = market.with_token(me.token)
        quote = mine.wait_for_quote(round_id=1)
        mine.buy(quote.round_id)

A market sells many tasks (issue 36; docs/tasks.md): the operator stores one from its task file
and enrols devices into it; a client acts in its code's task only, and its wallet pays for any::

    from decimal import Decimal
    from pathlib import Path

    from mots.platform.api.market import EnrolmentIn
    from mots.tasks.task_file import inline_task_text

    with MarketClient("http://127.0.0.1:8000", operator_token) as operator:
        operator.create_task(inline_task_text(Path("examples/tasks/digits.yaml")))
        issued = operator.enrol(
            EnrolmentIn(type_name="type-1", data_size=20, cost=Decimal("0.2"), task="digits")
        )
        print([(t.name, t.version, t.status) for t in operator.tasks()], issued.code)

Used by the edge agent (:mod:`edge.agent`), the platform's simulated clients
(:mod:`mots.local.agents`) and the ``mots market`` / ``mots rounds`` command lines;
:class:`RoundsClient` reads and opens rounds on the orchestration API, its answers the
service's own models (:mod:`mots.platform.api.rounds`: :class:`RoundOut`, :class:`RoundDetail`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mots.client.decision import (
        ClientFacts,
        draw_place,
        respond,
        targets_for,
        terms_for,
        tie_draw,
    )
    from mots.client.errors import MarketError, ModelIntegrityError
    from mots.client.market import DownloadedModel, MarketClient, new_idempotency_key
    from mots.client.rounds import OrchestrationError, RoundsClient
    from mots.platform.api.rounds import RoundDetail, RoundOut, RoundSummary, TrainingProgress

_EXPORTS = {
    **dict.fromkeys(
        ("ClientFacts", "draw_place", "respond", "targets_for", "terms_for", "tie_draw"),
        "mots.client.decision",
    ),
    **dict.fromkeys(
        ("DownloadedModel", "MarketClient"),
        "mots.client.market",
    ),
    **dict.fromkeys(("MarketError", "ModelIntegrityError"), "mots.client.errors"),
    "new_idempotency_key": "mots.client.market",
    "OrchestrationError": "mots.client.rounds",
    "RoundsClient": "mots.client.rounds",
    **dict.fromkeys(
        ("RoundDetail", "RoundOut", "RoundSummary", "TrainingProgress"), "mots.platform.api.rounds"
    ),
}
"""Where each name of the SDK lives. Imported on first use (PEP 562), so that a process that needs
one module (the evaluation worker loads a model with :mod:`mots.client.model_file`) does not
import the HTTP clients too."""


def __getattr__(name: str) -> Any:
    """The SDK's name ``name``, imported from its module the first time it is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mots.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ClientFacts",
    "DownloadedModel",
    "MarketClient",
    "MarketError",
    "ModelIntegrityError",
    "OrchestrationError",
    "RoundDetail",
    "RoundOut",
    "RoundSummary",
    "RoundsClient",
    "TrainingProgress",
    "draw_place",
    "new_idempotency_key",
    "respond",
    "targets_for",
    "terms_for",
    "tie_draw",
]
