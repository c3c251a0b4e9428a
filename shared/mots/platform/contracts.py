"""Every Celery task of the platform, declared once: its name, queue, input model and output model.

Services never import one another. They share these declarations: a sender calls
``send_call(app, MARKET_SETTLE_ROUND, SettlePayload(...), call_id)`` and returns at once; the
task's JSON result comes back as an :data:`ORCHESTRATION_REPLY` task on the orchestration queue
(a Celery ``link``), its failure as :data:`ORCHESTRATION_REPLY_ERROR` (``link_error``), and the
receiver validates it with ``spec.output`` (:class:`~mots.platform.api.rounds.SettleResult`). Nobody
waits on a task's result inside a task. A worker registers its function with
``@MARKET_SETTLE_ROUND.handler(app)``, and mypy checks that the function takes a ``SettlePayload``
and returns a ``SettleResult``. A renamed task or a changed field is a type error on both sides.
On the wire a payload stays plain JSON (``model_dump(mode="json")``), validated on arrival.

Why a thin layer of our own rather than Celery's ``@app.task(pydantic=True)``: Celery's option
covers only the handler, and only through the function's annotations resolved at run time (with
``from __future__ import annotations`` it falls back to no validation when a hint does not
resolve). The sender still calls ``send_task("market.settle_round", ...)`` by a string and gets an
untyped dict back, which is the gap this module closes. A :class:`TaskSpec` holds the name and both
models once, for both sides, in ~100 lines; every handler is also counted in ``mots_tasks_total``
by the same wrapper.

The payloads the tasks carry are declared here too, beside their specs (the settlement and the
error model's fit, which the round API shows, are :mod:`mots.platform.api.rounds`'s). Pricing has
no task: a round prices in process through :mod:`mots.platform.quotes`, and the pricing service
answers what-if quotes on its REST API only (issue 38). Task names
appear as string literals in this module only (a test keeps it so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from celery import Celery
from celery.result import AsyncResult
from pydantic import BaseModel, Field, field_validator

from mots.economics.scenario import ClientType
from mots.platform.api.base import (
    MAX_AMOUNT,
    Money,
    RoundState,
    Schema,
)
from mots.platform.api.rounds import ErrorEstimate, ErrorFit, SettleResult, TrainingCurve
from mots.platform.api.tasks import DEFAULT_TASK, TaskName
from mots.platform.metrics import TASKS
from mots.platform.timestamps import Timestamp

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True)
class TaskSpec(Generic[In, Out]):
    """One task: ``name`` (``<queue>.<verb>``), the ``queue`` its service's worker consumes, and
    the models of its input and its result."""

    name: str
    queue: str
    input: type[In]
    output: type[Out]

    def __post_init__(self) -> None:
        if not self.name.startswith(f"{self.queue}."):
            raise ValueError(f"task {self.name}: its name must start with its queue {self.queue!r}")

    @property
    def verb(self) -> str:
        """The task's name without its queue (the ``celery_task`` label of ``mots_tasks_total``)."""
        return self.name.removeprefix(f"{self.queue}.")

    def handler(self, app: Celery) -> Callable[[Callable[[In], Out]], Callable[[In], Out]]:
        """Register a function as this task of ``app``: JSON in is validated into the input model,
        the returned model goes out as JSON; every run is counted (ok or error)."""

        def register(fn: Callable[[In], Out]) -> Callable[[In], Out]:
            def run(payload: dict[str, Any]) -> dict[str, Any]:
                try:
                    result = fn(self.input.model_validate(payload))
                    if not isinstance(result, self.output):
                        raise TypeError(f"{self.name} returned {type(result).__name__}")
                except Exception:
                    TASKS.labels(self.queue, self.verb, "error").inc()
                    raise
                TASKS.labels(self.queue, self.verb, "ok").inc()
                return result.model_dump(mode="json")

            run.__doc__, run.__name__ = fn.__doc__, fn.__name__
            app.task(name=self.name)(run)
            return fn

        return register

    def body(self, payload: In) -> dict[str, Any]:
        """The JSON a payload travels as (refuses a payload of another model)."""
        if not isinstance(payload, self.input):
            raise TypeError(
                f"{self.name} takes {self.input.__name__}, not {type(payload).__name__}"
            )
        return payload.model_dump(mode="json")


ORCHESTRATION_REPLY = "orchestration.reply"
"""A call's result, back on the orchestration queue: run as ``reply(value, call_id)``."""
ORCHESTRATION_REPLY_ERROR = "orchestration.reply_error"
"""A call's failure, back on the orchestration queue: run as ``reply_error(call_id)`` (Celery
sends a failed task's id to an errback its worker does not know); the error is read from the
result backend, where the failed task stored it before its errbacks were sent."""


def send_call(app: Celery, spec: TaskSpec[In, Out], payload: In, call_id: str) -> None:
    """Send another service's task as call ``call_id`` (also its task id) and return: its result
    comes back as :data:`ORCHESTRATION_REPLY`, its failure as :data:`ORCHESTRATION_REPLY_ERROR`."""
    app.send_task(
        spec.name,
        args=[spec.body(payload)],
        queue=spec.queue,
        task_id=call_id,
        link=app.signature(ORCHESTRATION_REPLY, args=(call_id,), queue="orchestration"),
        link_error=app.signature(ORCHESTRATION_REPLY_ERROR, queue="orchestration"),
    )


def reply_handlers(
    app: Celery,
    on_value: Callable[[str, dict[str, Any]], None],
    on_error: Callable[[str, str], None],
) -> None:
    """Register the two reply tasks of ``app``: ``on_value(call_id, json)`` for a call's result,
    ``on_error(call_id, "Type: message")`` for its failure. Both forget the task's stored result."""

    def reply(value: dict[str, Any], call_id: str) -> None:
        on_value(call_id, value)
        app.AsyncResult(call_id).forget()

    def reply_error(call_id: str) -> None:
        stored = app.AsyncResult(call_id)
        failure = stored.result  # the failed task's stored exception: read, never waited for
        on_error(call_id, f"{type(failure).__name__}: {failure}")
        stored.forget()

    app.task(name=ORCHESTRATION_REPLY, ignore_result=True)(reply)
    app.task(name=ORCHESTRATION_REPLY_ERROR, ignore_result=True)(reply_error)


def send(app: Celery, spec: TaskSpec[In, Out], payload: In, countdown: float = 0.0) -> None:
    """Fire-and-forget another service's task (an event); nobody waits for its result."""
    app.send_task(
        spec.name,
        args=[spec.body(payload)],
        queue=spec.queue,
        countdown=countdown or None,
        ignore_result=True,
    )


def ask(app: Celery, spec: TaskSpec[In, Out], payload: In) -> AsyncResult:
    """Send another service's task and return its result handle, to be read once ``ready()``:
    never waited on (no task waits on another's result)."""
    return app.send_task(spec.name, args=[spec.body(payload)], queue=spec.queue)


# ---------------------------------------------------------------- task payloads


class NoInput(Schema):
    """The input of a task that takes none (an empty JSON object)."""


class RoundRef(Schema):
    """A task about one round, named by its id."""

    round_id: int


class TaskRef(Schema):
    """A call about one task (issue 36): the task's name (none named: the default task)."""

    task: TaskName = Field(DEFAULT_TASK, description="the task's name")


class PinnedTaskRef(TaskRef):
    """A call about one round's task at the version the round was opened on (issue 36: a version
    stored mid-round never trains or measures it)."""

    task_version: int | None = Field(
        None,
        ge=1,
        description="the task's version pinned at the round's open (None: the latest version)",
    )


class PopulationRequest(RoundRef, TaskRef):
    """A round to price, with the task it trains: only that task's active clients are members;
    the market refuses a task it does not store (404) or has retired (409), naming ``task``."""


class NodeKeysRequest(Schema):
    """Clients whose SuperNode public keys the orchestration needs: the given ones, and with
    ``round_id`` every member of that round (its population, which the market owns)."""

    client_ids: list[int] = Field(default_factory=list)
    round_id: int | None = Field(None, description="also every member of this round")


class NodeKeys(Schema):
    """SuperNode public keys (PEM) by client id (a client without a registered key is absent);
    with a round asked for, its members' client ids per type (``members``)."""

    keys: dict[int, str]
    members: dict[str, list[int]] = Field(
        default_factory=dict, description="the round's members per type, when a round was asked"
    )


class PublishedRound(Schema):
    """Acknowledges that a round's measurement now counts (its model was published)."""

    round_id: int
    counted: bool


class MarketRoundStatus(Schema):
    """A market round's state after the market acted on it (``collecting``, ``published``, …)."""

    round_id: int
    state: RoundState


class AdvanceRequest(Schema):
    """Run the step of ``state`` for a round (nothing happens if the round has left ``state``)."""

    round_id: int
    state: RoundState


class AdvanceResult(Schema):
    """What a step did: the state whose step comes next (None: none), a retry scheduled, or
    (``waiting``) a call sent whose reply runs the step again."""

    round_id: int
    next: RoundState | None = None
    retry: bool = False
    waiting: bool = False


class Population(Schema):
    """A round's population as the market snapshotted it for pricing (its members: the market
    owns them), types in non-decreasing data size (the order Eq. 3 expects): the scenario's own
    :class:`~mots.economics.scenario.ClientType` (N_i the type's members, D_i, C_i; Section
    2.A.2), which the orchestration prices as it comes. C_i is a parameter of the model, a float
    there, not an amount the ledger books."""

    types: list[ClientType]


class OpenRoundPayload(Schema):
    """The quote the orchestration service publishes to the market when a round opens."""

    round_id: int
    mechanism: str
    price: Money
    rewards: dict[str, Money]
    target_participants: dict[str, int]
    target_buyers: dict[str, int]
    epsilon: float
    welfare: float
    incentive_cost: Money
    subsidy_budget: Money | None = Field(
        None,
        ge=0,
        le=MAX_AMOUNT,
        description="most the platform may subsidise this round (None: the market's default)",
    )
    collect_deadline: Timestamp | None = Field(
        None, description="when the round stops taking decisions; the silent then abstain"
    )
    bonds: dict[str, Money] = Field(
        default_factory=dict,
        description="B_i per type, the participation bond held from a joiner's wallet at join "
        "(402 when short), slashed on a failed verification, else returned at settlement "
        "(mots.economics.bond; absent: none)",
    )
    task: TaskName = Field(
        DEFAULT_TASK, description="the task the round trains: only its clients take part (issue 36)"
    )

    @field_validator("bonds")
    @classmethod
    def _bonds_not_negative(cls, bonds: dict[str, Any]) -> dict[str, Any]:
        """A bond is money held, never a payout: B_i ≥ 0."""
        for name, b in bonds.items():
            if b < 0:
                raise ValueError(f"bonds: the bond of type {name!r} is {b}, a bond is ≥ 0")
        return bonds


class RoundDecisions(Schema):
    """Who declared what in a round, as the market recorded it."""

    round_id: int
    registered: int
    declared: int
    participants: dict[str, list[int]] = Field(..., description="client ids per type joining")
    buyers: dict[str, list[int]] = Field(..., description="client ids per type that declared buy")
    paid_buyers: dict[str, list[int]] = Field(..., description="buyers whose purchase is paid")
    members: dict[str, list[int]] = Field(
        default_factory=dict, description="the round's members per type (the market owns them)"
    )
    node_keys: dict[int, str] = Field(
        default_factory=dict,
        description="SuperNode public keys (PEM) of the members and participants, by client id",
    )


class DeclarationProgress(Schema):
    """How far a round's collection has got: O(1) to read at the market (its tally counters)."""

    round_id: int
    state: RoundState = Field(..., description="the market's state of the round")
    registered: int = Field(..., description="clients registered when the round opened")
    declared: int = Field(..., description="clients that have declared (or bought) so far")


class SettlePayload(Schema):
    """What the market books at settlement: rewards to the participants that completed training.

    ``dropped`` participants forfeit their reward and are not charged (the drop-out rule);
    ``refund_buyers`` returns every buyer's payment (a failed round). The realised terms are
    captured within the round's quote and subsidy budget (:mod:`mots.economics.capture`).
    """

    round_id: int
    rewards: dict[str, Money] = Field(..., description="r_i per type at the realised state")
    price: Money | None = Field(
        None, description="p at the realised state (None: buyers pay the quoted price)"
    )
    participants: list[int] | None = Field(
        None,
        description="client ids paid or charged r_i (None: those the market recorded as joining)",
    )
    dropped: list[int] = Field(default_factory=list)
    failed_verification: list[int] = Field(
        default_factory=list,
        description="of ``dropped``, the participants whose update failed verification: their "
        "participation bond is slashed (to platform:surplus), every other bond returned",
    )
    refund_buyers: bool = False
    artifact_path: str | None = None
    artifact_sha256: str | None = None


class EvaluationRequest(PinnedTaskRef):
    """A trained round's model to measure, with its coalition (K per type) and data sizes, on
    its task's evaluation data (the measurement counts in that task's error model only)."""

    round_id: int
    artifact_path: str
    artifact_sha256: str
    participants: list[int]
    sizes: list[float]
    train_epsilon: float | None = None


class EvaluationResult(Schema):
    """The measured test loss of a round's model and the refitted error model."""

    round_id: int
    test_loss: float
    accuracy: float | None
    seconds: float
    fit: ErrorFit | None


class ErrorPosteriorEstimate(ErrorEstimate):
    """The evaluation service's posterior over Eq. 3's parameters (:mod:`mots.economics.error_online`):
    the point estimate pricing uses, each parameter's posterior standard deviation, and how many
    published measurements it holds (0: the prior)."""

    sd: dict[str, float] = Field(..., description="posterior sd of eps0, d_gamma2 and sigma2")


class CurrentErrorModel(Schema):
    """The error model learned from every published measurement so far: the least-squares ``fit``
    (None below enough distinct coalitions) and the Bayesian ``posterior`` (from the first)."""

    fit: ErrorFit | None
    posterior: ErrorPosteriorEstimate | None = None


# ---------------------------------------------------------------- market (its worker: market)

MARKET_POPULATION = TaskSpec("market.population", "market", PopulationRequest, Population)
"""A round's population, snapshotted at the market as its members, counted by type (non-decreasing
data size); called again for the same round, the same snapshot."""
MARKET_OPEN_ROUND = TaskSpec("market.open_round", "market", OpenRoundPayload, MarketRoundStatus)
"""Publish a round's quote; the market starts collecting decisions and purchases."""
MARKET_DECLARATION_PROGRESS = TaskSpec(
    "market.declaration_progress", "market", RoundRef, DeclarationProgress
)
"""How many clients have declared so far against the population: the collecting round's poll
(reads counters, never the population)."""
MARKET_CLOSE_ROUND = TaskSpec("market.close_round", "market", RoundRef, RoundDecisions)
"""Stop taking decisions and purchases; the final decisions, with the round's members and their
SuperNode keys (what training needs: no second call for them)."""
MARKET_SETTLE_ROUND = TaskSpec("market.settle_round", "market", SettlePayload, SettleResult)
"""Book rewards, charges, refunds, subsidy and surplus (idempotent); with a model artifact, also
publish the round in the same transaction (one call settles and publishes)."""
MARKET_NODE_KEYS = TaskSpec("market.node_keys", "market", NodeKeysRequest, NodeKeys)
"""The SuperNode public keys the given clients registered (those without one are absent)."""


def round_calls(calls: list[str]) -> int:
    """A round's service calls counted from its call log (``RoundDetail.calls``): every task its
    steps sent but the collection's progress polls (at most 7 per round, issue 38)."""
    return sum(task != MARKET_DECLARATION_PROGRESS.name for task in calls)


def resent_calls(calls: list[str]) -> int:
    """How many of a round's calls (polls apart) were sends of a task the round had already
    sent: a call lost to a fault (a worker killed between its claim and its send, its reply lost)
    and sent again once past its timeout. Each of a round's seven calls is a different task, so
    ``round_calls(calls) - resent_calls(calls)`` counts each call once however often it was sent."""
    tasks = [task for task in calls if task != MARKET_DECLARATION_PROGRESS.name]
    return len(tasks) - len(set(tasks))


# ---------------------------------------------------------------- evaluation

EVALUATION_EVALUATE = TaskSpec(
    "evaluation.evaluate", "evaluation", EvaluationRequest, EvaluationResult
)
"""Measure a round's model on the held-out test set and refit the error model (Eq. 3)."""
EVALUATION_ERROR_MODEL = TaskSpec(
    "evaluation.error_model", "evaluation", TaskRef, CurrentErrorModel
)
"""The task's error model fitted to the measurements of its published rounds (None below
enough points): each task learns its own (issue 36)."""
EVALUATION_PUBLISHED = TaskSpec("evaluation.published", "evaluation", RoundRef, PublishedRound)
"""A round's model was published: its measurement now counts in the error model's fit."""

# ---------------------------------------------------------------- training (its worker: training)


class Coalition(BaseModel):
    """Who trains: the participants' client ids per type (the j-th is the type's participant j),
    every enrolled client's id per type, their SuperNode public keys (PEM, by client id), the ε
    the market priced (the quality gate's yardstick) and the types' names."""

    clients: list[list[int]] = Field(default_factory=list)
    enrolled: list[list[int]] = Field(default_factory=list)
    node_keys: dict[int, str] = Field(default_factory=dict)
    quoted_epsilon: float | None = None
    type_names: list[str] = Field(default_factory=list)


class TrainRequest(Coalition, PinnedTaskRef):
    """Train a round's coalition: K per type (``participants``), the types' data sizes and each
    enrolled node's type, besides who the participants are (:class:`Coalition`), for the round's
    task at its pinned version (its model, its ``rounds:`` settings, its data)."""

    round_id: int
    participants: list[int]
    sizes: list[float]
    node_types: list[int]


class TrainResult(TrainingCurve):
    """What a round's training produced: the engine's curve (ε, losses, round seconds, metadata)
    and the published model file; ``completed`` counts per type the participants whose
    updates were verified in every round they were asked for; ``participants`` says, per
    participant (``client_id`` when known), ``status`` (verified, dropped, failed_verification),
    the round it left in and why."""

    artifact_path: str
    artifact_sha256: str
    completed: list[int]
    seconds: float
    participants: list[dict[str, Any]] = Field(default_factory=list)


TRAINING_TRAIN = TaskSpec("training.train", "training", TrainRequest, TrainResult)
"""Train a round's coalition with Flower on the training worker (its own queue: a long training
never holds the worker that answers the round's next step). Its task id is the round's call id,
by which the worker skips a training whose call the round has given up."""

# ---------------------------------------------------------------- orchestration

ORCHESTRATION_ADVANCE = TaskSpec(
    "orchestration.advance", "orchestration", AdvanceRequest, AdvanceResult
)
"""Run one step of a round (if it is still in that state) and enqueue the next."""
ORCHESTRATION_DECISIONS_COMPLETE = TaskSpec(
    "orchestration.decisions_complete", "orchestration", RoundRef, AdvanceResult
)
"""Event from the market: every client has declared, so collection need not wait."""

ALL_TASKS: tuple[TaskSpec[Any, Any], ...] = (
    MARKET_POPULATION,
    MARKET_OPEN_ROUND,
    MARKET_DECLARATION_PROGRESS,
    MARKET_CLOSE_ROUND,
    MARKET_SETTLE_ROUND,
    MARKET_NODE_KEYS,
    EVALUATION_EVALUATE,
    EVALUATION_ERROR_MODEL,
    EVALUATION_PUBLISHED,
    TRAINING_TRAIN,
    ORCHESTRATION_ADVANCE,
    ORCHESTRATION_DECISIONS_COMPLETE,
)
"""Every task of the platform (the routes of :func:`mots.platform.celery_app.make_celery`)."""
