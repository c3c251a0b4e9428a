"""The round machine's services port over Celery: each method is one task of
:mod:`mots.platform.contracts`, called on its service's queue and awaited. A call that gets no
answer (timed out, or the broker away) raises :class:`~.ports.ServiceUnavailable`, so the step
runs again; an error the service answered with is raised as it is."""

from __future__ import annotations

from typing import TypeVar

import redis.exceptions
from celery import Celery
from celery.exceptions import TimeoutError as CeleryTimeout
from kombu.exceptions import OperationalError
from pydantic import BaseModel

from mots.platform.contracts import (
    EVALUATION_ERROR_MODEL,
    EVALUATION_EVALUATE,
    EVALUATION_PUBLISHED,
    MARKET_CLOSE_ROUND,
    MARKET_DECLARATION_PROGRESS,
    MARKET_NODE_KEYS,
    MARKET_OPEN_ROUND,
    MARKET_POPULATION,
    MARKET_PUBLISH,
    MARKET_SETTLE_ROUND,
    PRICING_EQUILIBRIUM,
    PRICING_QUOTE,
    TaskSpec,
    call,
)
from mots.platform.schemas import (
    CurrentErrorModel,
    DeclarationProgress,
    EquilibriumRequest,
    EquilibriumResult,
    EvaluationRequest,
    EvaluationResult,
    NodeKeysRequest,
    NoInput,
    OpenRoundPayload,
    Population,
    PricingRequest,
    PricingResult,
    RoundDecisions,
    RoundRef,
    SettlePayload,
    SettleResult,
)
from services.orchestration.rounds.ports import ServiceUnavailable

LOST = (
    CeleryTimeout,
    OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    TimeoutError,
)
"""What a call with no answer raises: its task or reply was lost, or the broker is away."""

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


class CeleryRoundServices:
    """The market, pricing and evaluation services through their Celery queues."""

    def __init__(self, app: Celery, timeout_s: float, evaluate_timeout_s: float = 120.0) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self.evaluate_timeout_s = evaluate_timeout_s

    def _call(self, spec: TaskSpec[In, Out], payload: In, timeout_s: float | None = None) -> Out:
        try:
            return call(self.app, spec, payload, timeout_s or self.timeout_s)
        except LOST as exc:
            raise ServiceUnavailable(f"{spec.name}: no answer ({type(exc).__name__})") from exc

    def error_model(self) -> CurrentErrorModel:
        """The :data:`~mots.platform.contracts.EVALUATION_ERROR_MODEL` task."""
        return self._call(EVALUATION_ERROR_MODEL, NoInput())

    def population(self) -> Population:
        """The :data:`~mots.platform.contracts.MARKET_POPULATION` task."""
        return self._call(MARKET_POPULATION, NoInput())

    def quote(self, request: PricingRequest) -> PricingResult:
        """The :data:`~mots.platform.contracts.PRICING_QUOTE` task."""
        return self._call(PRICING_QUOTE, request)

    def equilibrium(self, request: EquilibriumRequest) -> EquilibriumResult:
        """The :data:`~mots.platform.contracts.PRICING_EQUILIBRIUM` task."""
        return self._call(PRICING_EQUILIBRIUM, request)

    def open(self, quote: OpenRoundPayload) -> None:
        """The :data:`~mots.platform.contracts.MARKET_OPEN_ROUND` task."""
        self._call(MARKET_OPEN_ROUND, quote)

    def progress(self, round_id: int) -> DeclarationProgress:
        """The :data:`~mots.platform.contracts.MARKET_DECLARATION_PROGRESS` task."""
        return self._call(MARKET_DECLARATION_PROGRESS, RoundRef(round_id=round_id))

    def close(self, round_id: int) -> RoundDecisions:
        """The :data:`~mots.platform.contracts.MARKET_CLOSE_ROUND` task."""
        return self._call(MARKET_CLOSE_ROUND, RoundRef(round_id=round_id))

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        """The :data:`~mots.platform.contracts.EVALUATION_EVALUATE` task."""
        return self._call(EVALUATION_EVALUATE, request, self.evaluate_timeout_s)

    def settle(self, payload: SettlePayload) -> SettleResult:
        """The :data:`~mots.platform.contracts.MARKET_SETTLE_ROUND` task."""
        return self._call(MARKET_SETTLE_ROUND, payload)

    def publish(self, round_id: int) -> None:
        """The :data:`~mots.platform.contracts.MARKET_PUBLISH` task."""
        self._call(MARKET_PUBLISH, RoundRef(round_id=round_id))

    def node_keys(self, client_ids: list[int]) -> dict[int, str]:
        """The :data:`~mots.platform.contracts.MARKET_NODE_KEYS` task."""
        return self._call(MARKET_NODE_KEYS, NodeKeysRequest(client_ids=client_ids)).keys

    def measurement_published(self, round_id: int) -> bool:
        """The :data:`~mots.platform.contracts.EVALUATION_PUBLISHED` task."""
        return self._call(EVALUATION_PUBLISHED, RoundRef(round_id=round_id)).counted
