"""What each state of a round does: one handler per state, from (round, ports) to a decision.

A round is of one task (issue 36): it prices that task's population with the task's economics,
trains and evaluates the task's model and publishes it for that task; rounds of different tasks
run side by side, each through its own steps. Every step reads the task at the version pinned
when the round opened (``rnd.task_version``), so a version stored mid-round never mixes in; a
task file edited to another version mid-round fails the round (settled by rule, buyers
refunded: :class:`~mots.tasks.stored.TaskVersionChanged`).

A handler calls the other services by the contract's TaskSpec through ``ports.call`` (a
``TaskSpec`` and its payload in, the spec's output model back) and returns a :class:`Move` (the
next state and what to record) or a :class:`Wait`; it never writes the round itself. Raising
fails the round (:mod:`.machine` moves it to ``failed`` with the error as its rule).

Stated rules: clients silent when collection ends abstain; declared buyers who have not paid
abstain. A participant whose node drops out mid-training, or whose update fails verification in
a round it was asked for, forfeits its reward, is not charged and gets no model (the round
completes with the others): only participants whose updates were verified in every round they
were asked for are paid. Only a published round's measurement shapes the error model. A round with no participant, or whose
training, evaluation or settlement fails, is *settled by rule*: every buyer is refunded, no reward
is paid and no charge is made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TypeVar

from mots.economics.bond import participation_bond
from mots.economics.scenario import ClientType, ErrorModel, Scenario
from mots.platform import quotes
from mots.platform.api.base import RoundState
from mots.platform.api.pricing import EquilibriumResult, PricingRequest, PricingResult
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import (
    EVALUATION_ERROR_MODEL,
    EVALUATION_EVALUATE,
    EVALUATION_PUBLISHED,
    MARKET_CLOSE_ROUND,
    MARKET_DECLARATION_PROGRESS,
    MARKET_OPEN_ROUND,
    MARKET_POPULATION,
    MARKET_SETTLE_ROUND,
    TRAINING_TRAIN,
    Coalition,
    CurrentErrorModel,
    EvaluationRequest,
    OpenRoundPayload,
    PopulationRequest,
    RoundDecisions,
    RoundRef,
    SettlePayload,
    TaskRef,
    TrainRequest,
    TrainResult,
)
from mots.platform.metrics import PRICING_DURATION
from mots.platform.money import from_micros, money
from services.orchestration.products import RoundTerms, TrainingRecord
from services.orchestration.rounds.ports import (
    Move,
    RoundFailure,
    RoundPorts,
    RoundRecord,
    RoundUpdate,
    Wait,
)
from services.orchestration.rounds.prometheus import round_summary
from services.orchestration.rounds.task_economics import TaskEconomics, economics_of

log = logging.getLogger(__name__)
S = RoundState
T = TypeVar("T")

Handler = Callable[[RoundRecord, RoundPorts], Move | Wait]


def _product(value: T | None, name: str, rnd: RoundRecord) -> T:
    """A product an earlier state must have stored."""
    if value is None:
        raise RoundFailure(f"round {rnd.id} has no {name} in {rnd.state.value}")
    return value


def error_model(ports: RoundPorts, econ: TaskEconomics | None = None) -> tuple[ErrorModel, str]:
    """The task's error model (Eq. 3): the evaluation service's posterior point estimate, learned
    from the task's own published rounds (``mots.economics.error_online``); from an older
    evaluation service its refit once it has enough points; else the task's prior. A task that
    does not learn online (its file's ``learned_online: false``) prices with its prior."""
    econ = econ or economics_of(DEFAULT_TASK, ports.settings)
    prior = ErrorModel.model_validate(econ.prior)
    if not econ.learned_online:
        return prior, "prior (not learned online)"
    try:
        current = ports.call(EVALUATION_ERROR_MODEL, TaskRef(task=econ.task))
    except Exception as exc:  # the evaluation service being down must not stop the market
        log.warning("the error model is unavailable (%s); using the prior", exc)
        current = CurrentErrorModel(fit=None)
    post, fit = current.posterior, current.fit
    if post is not None and post.points > 0:
        model = ErrorModel(eps0=post.eps0, d_gamma2=post.d_gamma2, sigma2=post.sigma2)
        return model, f"posterior of {post.points} measured rounds"
    if fit is not None and fit.points >= ports.settings.min_fit_points and fit.d_gamma2 > 0:
        return ErrorModel(eps0=fit.eps0, d_gamma2=fit.d_gamma2, sigma2=fit.sigma2), "measured"
    return prior, "prior"


def _price(
    scenario: Scenario, mechanism: str, k: list[int] | None = None, b: list[int] | None = None
) -> PricingResult:
    """The mechanism's terms at K* (no ``k``) or at the realised state (K, B): a library call
    (:mod:`mots.platform.quotes`), not a service's; a scenario it cannot price fails the round."""
    document = scenario.model_dump(mode="json")
    request = PricingRequest(scenario=document, mechanism=mechanism, participants=k, buyers=b)
    with PRICING_DURATION.labels("quote").time():  # the round's own pricing, now in process
        return quotes.price(scenario, mechanism, request)


def open_round(rnd: RoundRecord, ports: RoundPorts) -> Move | Wait:
    """Price the round's task's population at K* with the task's own economics (U(ε), ε_req, its
    learned error model, mechanism, subsidy budget: :mod:`.task_economics`) and publish the quote
    to the market. The market owns the membership: it snapshots the task's population it reports
    here as the round's members and admits exactly them at the open (less any deactivated in
    between); the round keeps only the counts (its scenario's)."""
    econ = economics_of(rnd.task, ports.settings, rnd.task_version)
    population = ports.call(MARKET_POPULATION, PopulationRequest(round_id=rnd.id, task=rnd.task))
    if not population.types:
        raise RoundFailure(f"no registered clients of task {rnd.task!r}: nothing to price")
    errors, source = error_model(ports, econ)
    scenario = Scenario.model_validate(
        {
            "types": population.types,
            "error_model": errors,
            "utility": econ.utility,
            "eps_req": econ.eps_req,
        }
    )
    quote = _price(scenario, econ.mechanism)
    names = quote.type_names
    window = rnd.collect_seconds or econ.collect_seconds
    deadline = ports.clock() + window
    ports.call(
        MARKET_OPEN_ROUND,
        OpenRoundPayload(
            round_id=rnd.id,
            mechanism=quote.mechanism,
            price=money(quote.price),
            rewards={n: money(r) for n, r in zip(names, quote.rewards, strict=True)},
            target_participants=dict(zip(names, quote.participants, strict=True)),
            target_buyers=dict(zip(names, quote.buyers, strict=True)),
            epsilon=quote.epsilon,
            welfare=quote.welfare,
            incentive_cost=money(quote.incentive_cost),
            subsidy_budget=econ.subsidy_budget
            if rnd.subsidy_budget_micros is None
            else from_micros(rnd.subsidy_budget_micros),
            collect_deadline=datetime.fromtimestamp(deadline, UTC),
            bonds=_bonds(population.types, ports),
            task=rnd.task,
        ),
    )
    update = RoundUpdate(
        mechanism=quote.mechanism,
        scenario=scenario,
        quote=quote,
        collect_deadline=deadline,
    )
    return Move(S.COLLECTING, f"error model: {source}", update)


def _bonds(types: Sequence[ClientType], ports: RoundPorts) -> dict[str, Decimal]:
    """B_i per type, :func:`mots.economics.bond.participation_bond` of its C_i with the
    deployment's measured detection rate q and deterred work fraction φ (0 types omitted)."""
    q, phi = ports.settings.bond_detection_rate, ports.settings.bond_work_fraction
    out = {t.name: money(participation_bond(float(t.cost), q, phi)) for t in types}
    return {n: b for n, b in out.items() if b > 0}


def collect(rnd: RoundRecord, ports: RoundPorts) -> Move | Wait:
    """Wait until every client has declared or the deadline passes; then close the round and
    price the realised state (K, B), or fail it if nobody joined."""
    seen = ports.call(
        MARKET_DECLARATION_PROGRESS, RoundRef(round_id=rnd.id)
    )  # two counters, not the population's decisions
    if seen.declared < seen.registered and ports.clock() < (rnd.collect_deadline or 0.0):
        return Wait(ports.settings.poll_interval_s)
    final = ports.call(
        MARKET_CLOSE_ROUND, RoundRef(round_id=rnd.id)
    )  # members' decisions only: the market admits no other
    scenario = _product(rnd.scenario, "scenario", rnd)
    names = [t.name for t in scenario.types]
    k = [len(final.participants.get(n, [])) for n in names]
    b = [len(final.paid_buyers.get(n, [])) for n in names]
    if sum(k) == 0:  # no coalition: no model, so no schedule to price (ε is +∞ at K = 0)
        rule = "no participant joined: no model is trained; buyers are refunded"
        update = RoundUpdate(rule=rule, decisions=final, terms=RoundTerms.no_model(names, k, b))
        return Move(S.FAILED, rule, update)
    mechanism = rnd.mechanism or economics_of(rnd.task, ports.settings, rnd.task_version).mechanism
    with PRICING_DURATION.labels("equilibrium").time():
        check = EquilibriumResult.model_validate(quotes.equilibrium(scenario, mechanism, k, b))
    priced = _price(scenario, mechanism, k, b)
    update = RoundUpdate(decisions=final, terms=RoundTerms.at_state(priced, check))
    return Move(S.TRAINING, f"K={k} B={b}", update)


def train(rnd: RoundRecord, ports: RoundPorts) -> Move | Wait:
    """Train the coalition K on the participants' own nodes; those whose updates were not
    verified in every round they were asked for (dropped out, or failed verification) forfeit."""
    terms = _product(rnd.terms, "terms", rnd)
    scenario = _product(rnd.scenario, "scenario", rnd)
    decisions = _product(rnd.decisions, "decisions", rnd)
    k = terms.participants
    names = [t.name for t in scenario.types]
    request = TrainRequest(
        task=rnd.task,
        task_version=rnd.task_version,
        round_id=rnd.id,
        participants=k,
        sizes=[t.data_size for t in scenario.types],
        node_types=[i for i, t in enumerate(scenario.types) for _ in range(t.count)],
        **_coalition(rnd, names, terms.epsilon).model_dump(),
    )
    try:  # the training worker records each FedAvg round's progress on the round itself
        outcome = ports.call(TRAINING_TRAIN, request, ports.settings.train_timeout_s)
    except Exception as exc:
        raise RoundFailure(
            f"training failed ({type(exc).__name__}: {exc}): buyers are refunded, no reward is paid"
        ) from exc
    if sum(outcome.completed) == 0:
        raise RoundFailure("no participant delivered verified updates: buyers are refunded")
    dropped, failed = _forfeits(outcome, k, scenario, decisions)
    note = f"ε={outcome.epsilon:.4f} in {outcome.seconds:.1f}s"
    if dropped:
        note += f"; dropped out: {dropped}"
    if failed:
        note += f"; failed verification: {failed}"
    training = TrainingRecord(**outcome.model_dump(), dropped=dropped, failed_verification=failed)
    return Move(S.EVALUATING, note, RoundUpdate(training=training))


def _coalition(rnd: RoundRecord, names: list[str], quoted: float | None) -> Coalition:
    """The participants per type (by client id), every member of the round and their SuperNode
    keys, as the market's ``close_round`` answered them (the round asks for nothing more)."""
    decisions = _product(rnd.decisions, "decisions", rnd)
    clients = [sorted(decisions.participants.get(n, [])) for n in names]
    enrolled = [sorted(decisions.members.get(n, [])) for n in names]
    return Coalition(
        clients=clients,
        enrolled=enrolled,
        node_keys=decisions.node_keys,
        quoted_epsilon=quoted,
        type_names=list(names),
    )


def _forfeits(
    outcome: TrainResult, k: list[int], scenario: Scenario, decisions: RoundDecisions
) -> tuple[list[int], list[int]]:
    """(dropped out, failed verification): client ids, from the engine's record of each
    participant; without one, per type the last-registered joiners beyond the completed count."""
    by_client = [p for p in outcome.participants if p.get("client_id") is not None]
    if by_client:
        dropped = sorted(p["client_id"] for p in by_client if p["status"] == "dropped")
        failed = sorted(p["client_id"] for p in by_client if p["status"] == "failed_verification")
        return dropped, failed
    dropped = []
    for i, t in enumerate(scenario.types):
        missing = k[i] - outcome.completed[i]
        if missing > 0:
            dropped.extend(sorted(decisions.participants.get(t.name, []))[-missing:])
    return dropped, []


def evaluate(rnd: RoundRecord, ports: RoundPorts) -> Move | Wait:
    """Measure the trained model on the held-out test set."""
    training = _product(rnd.training, "training", rnd)
    scenario = _product(rnd.scenario, "scenario", rnd)
    result = ports.call(
        EVALUATION_EVALUATE,
        EvaluationRequest(
            task=rnd.task,
            task_version=rnd.task_version,
            round_id=rnd.id,
            artifact_path=training.artifact_path,
            artifact_sha256=training.artifact_sha256,
            participants=training.completed,
            sizes=[t.data_size for t in scenario.types],
            train_epsilon=training.epsilon,
        ),
        ports.settings.evaluate_timeout_s,
    )
    return Move(S.SETTLING, f"test loss {result.test_loss:.4f}", RoundUpdate(evaluation=result))


def settle(rnd: RoundRecord, ports: RoundPorts) -> Move | Wait:
    """Book the money at the realised state (dropouts forfeit) and publish the model, one call to
    the market (it knows who joined: only the dropouts are named); the market captures the
    realised terms within the quote and the round's subsidy budget. The evaluation service hears
    of the publication as an event (no reply)."""
    terms = _product(rnd.terms, "terms", rnd)
    training = _product(rnd.training, "training", rnd)
    payload = SettlePayload(
        round_id=rnd.id,
        rewards={n: money(r) for n, r in zip(terms.type_names, terms.rewards, strict=True)},
        price=None if terms.price is None else money(terms.price),
        dropped=sorted({*training.dropped, *training.failed_verification}),
        failed_verification=sorted(training.failed_verification),
        artifact_path=training.artifact_path,
        artifact_sha256=training.artifact_sha256,
    )
    settlement = ports.call(MARKET_SETTLE_ROUND, payload)
    try:  # the published round's measurement now shapes the error model (best effort)
        ports.notify(EVALUATION_PUBLISHED, RoundRef(round_id=rnd.id))
    except Exception:
        log.warning("round %s: the evaluation service did not count it", rnd.id, exc_info=True)
    summary = round_summary(
        rnd, terms, training, settlement, True, ports.store.phase_seconds(rnd.id), _now(ports)
    )
    return Move(S.PUBLISHED, "model published", RoundUpdate(summary=summary))


def settle_by_rule(rnd: RoundRecord, ports: RoundPorts) -> Move | Wait:
    """A failed round: refund every buyer if the market had opened it; no reward, no charge."""
    settlement = None
    if rnd.quote is not None:  # the market opened the round: refund its buyers
        settlement = ports.call(
            MARKET_SETTLE_ROUND, SettlePayload(round_id=rnd.id, rewards={}, refund_buyers=True)
        )
    summary = round_summary(
        rnd, rnd.terms, None, settlement, False, ports.store.phase_seconds(rnd.id), _now(ports)
    )
    update = RoundUpdate(summary=summary)
    return Move(S.SETTLED_BY_RULE, rnd.rule or "settled by rule", update)


def _now(ports: RoundPorts) -> datetime:
    return datetime.fromtimestamp(ports.clock(), UTC)


HANDLERS: dict[RoundState, Handler] = {
    S.OPEN: open_round,
    S.COLLECTING: collect,
    S.TRAINING: train,
    S.EVALUATING: evaluate,
    S.SETTLING: settle,
    S.FAILED: settle_by_rule,
}
"""The step of every state that has one (the terminal states have none)."""
