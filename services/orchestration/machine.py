"""A market round as an explicit state machine, persisted so that it survives a restart.

    open ─► collecting ─► training ─► evaluating ─► settling ─► published
      └──────────┴────────────┴────────────┴────────────┴─► failed ─► settled_by_rule

Each state's step calls other services through their queues, then moves the round with a
compare-and-set on its state (``UPDATE … WHERE state = expected``): a duplicated or re-delivered
step message finds the round elsewhere and does nothing. On start the worker re-enqueues the
step of every round not in a terminal state (see ``worker.recover``).

Stated rules: clients silent when collection ends abstain; declared buyers who have not paid
abstain. A participant whose node drops out mid-training forfeits its reward, is not charged and
gets no model (the round completes with the others). A round with no participant, or whose
training, evaluation or settlement fails, is *settled by rule*: every buyer is refunded, no reward
is paid and no charge is made.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

from celery import Celery
from sqlalchemy import CursorResult, update
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import metrics
from mots.platform.celery_app import call
from mots.platform.money import from_micros, to_micros
from mots.platform.schemas import (
    ErrorFit,
    EvaluationRequest,
    EvaluationResult,
    OpenRoundPayload,
    Population,
    PricingRequest,
    PricingResult,
    RoundDecisions,
    RoundState,
    SettlePayload,
    SettleResult,
)
from mots.training.progress import RoundProgress
from services.orchestration.core.config import Settings
from services.orchestration.models import Round, Transition
from services.orchestration.trainer import Trainer, TrainingOutcome

log = logging.getLogger(__name__)

S = RoundState
ALLOWED: dict[RoundState, set[RoundState]] = {
    S.OPEN: {S.COLLECTING, S.FAILED},
    S.COLLECTING: {S.TRAINING, S.FAILED},
    S.TRAINING: {S.EVALUATING, S.FAILED},
    S.EVALUATING: {S.SETTLING, S.FAILED},
    S.SETTLING: {S.PUBLISHED, S.FAILED},
    S.FAILED: {S.SETTLED_BY_RULE},
    S.PUBLISHED: set(),
    S.SETTLED_BY_RULE: set(),
}


class _Json(dict[str, Any]):
    """A plain-JSON task result (for tasks without a pydantic result schema)."""

    @classmethod
    def model_validate(cls, value: Any) -> _Json:
        return cls(value)


@dataclass(frozen=True)
class Step:
    """What to do after a step: run ``state``'s step after ``countdown`` seconds, or stop (None)."""

    state: RoundState | None
    countdown: float = 0.0


class RoundFailure(RuntimeError):
    """A step that cannot complete; the round goes to ``failed`` with this rule."""


def create_round(sessions: sessionmaker[Session]) -> int:
    """Insert a new round in ``open``; refuse while another round is in flight."""
    with sessions() as session, session.begin():
        busy = (
            session.query(Round)
            .filter(Round.state.notin_([s.value for s in (S.PUBLISHED, S.SETTLED_BY_RULE)]))
            .with_for_update()
            .first()
        )
        if busy is not None:
            raise RoundFailure(f"round {busy.id} is still {busy.state}; one round at a time")
        rnd = Round(state=S.OPEN.value)
        session.add(rnd)
        session.flush()
        return rnd.id


def training_progress(p: RoundProgress) -> dict[str, Any]:
    """A FedAvg round's progress as the round API shows it (1-based round; ε None before the
    first round's model is evaluated)."""
    return {
        "fedavg_round": p.round + 1,
        "fedavg_rounds": p.rounds,
        "clients_done": p.clients_done,
        "clients": p.clients,
        "epsilon": p.epsilon if math.isfinite(p.epsilon) else None,
        "round_seconds": p.seconds,
        "in_progress": p.partial,
    }


class RoundMachine:
    """Runs the steps of rounds against the other services and persists every transition."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        celery: Celery,
        trainer: Trainer,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.celery = celery
        self.trainer = trainer

    # ------------------------------------------------------------------ persistence

    def create(self) -> int:
        """A new round in ``open`` (at most one round may be in flight)."""
        return create_round(self.sessions)

    def _load(self, round_id: int) -> Round:
        with self.sessions() as session:
            rnd = session.get(Round, round_id)
            if rnd is None:
                raise RoundFailure(f"round {round_id} does not exist")
            return rnd

    def _move(
        self, round_id: int, src: RoundState, dst: RoundState, note: str = "", **fields: Any
    ) -> bool:
        """Compare-and-set the round from ``src`` to ``dst`` with ``fields``; False if it moved on."""
        if dst not in ALLOWED[src]:
            raise AssertionError(f"transition {src} → {dst} is not in the machine")
        now = datetime.now(UTC)
        with self.sessions() as session, session.begin():
            rnd = session.get(Round, round_id)
            assert rnd is not None
            entered = rnd.state_entered_at
            if entered.tzinfo is None:
                entered = entered.replace(tzinfo=UTC)
            seconds = (now - entered).total_seconds()
            result = session.execute(
                update(Round)
                .where(Round.id == round_id, Round.state == src.value)
                .values(state=dst.value, state_entered_at=now, **fields)
            )
            moved = cast(CursorResult[Any], result).rowcount
            if not moved:
                return False
            session.add(
                Transition(
                    round_id=round_id,
                    from_state=src.value,
                    to_state=dst.value,
                    seconds_in_from=seconds,
                    note=note or None,
                )
            )
        metrics.ROUND_PHASE_DURATION.labels(src.value).observe(seconds)
        log.info("round %s: %s → %s %s", round_id, src.value, dst.value, note)
        return True

    # ------------------------------------------------------------------ driving

    def step(self, round_id: int, expected: RoundState) -> Step:
        """Run ``expected``'s step if the round is still there; any failure fails the round."""
        rnd = self._load(round_id)
        if rnd.state != expected.value:
            return Step(None)
        handler = {
            S.OPEN: self._open,
            S.COLLECTING: self._collect,
            S.TRAINING: self._train,
            S.EVALUATING: self._evaluate,
            S.SETTLING: self._settle,
            S.FAILED: self._settle_by_rule,
        }.get(expected)
        if handler is None:
            return Step(None)
        try:
            return handler(rnd)
        except Exception as exc:
            if expected == S.FAILED:
                raise  # settlement by rule is retried by the worker, not failed again
            rule = str(exc) if isinstance(exc, RoundFailure) else f"{type(exc).__name__}: {exc}"
            log.exception("round %s failed in %s", round_id, expected.value)
            if self._move(round_id, expected, S.FAILED, rule, error=rule, rule=rule):
                return Step(S.FAILED)
            return Step(None)

    def _call(self, task: str, payload: Any, result_type: Any) -> Any:
        return call(self.celery, task, payload, result_type, self.settings.task_timeout_s)

    def _error_model(self) -> tuple[dict[str, float], str]:
        """The evaluation service's refit once it has enough points, else the configured prior."""
        try:
            fit = self._call("evaluation.error_model", {}, _Json)
        except Exception as exc:  # the evaluation service being down must not stop the market
            log.warning("evaluation.error_model unavailable (%s); using the prior", exc)
            fit = {}
        if fit.get("fit"):
            f = ErrorFit.model_validate(fit["fit"])
            if f.points >= 4 and f.d_gamma2 > 0:
                return {"eps0": f.eps0, "d_gamma2": f.d_gamma2, "sigma2": f.sigma2}, "measured"
        return dict(self.settings.prior_error_model), "prior"

    def _open(self, rnd: Round) -> Step:
        population = self._call("market.population", {}, Population)
        if not population.types:
            raise RoundFailure("no registered clients: nothing to price")
        error_model, source = self._error_model()
        scenario = {
            "types": [
                {
                    "name": t.name,
                    "count": len(t.client_ids),
                    "data_size": t.data_size,
                    "cost": float(t.cost),
                }
                for t in population.types
            ],
            "error_model": error_model,
            "utility": self.settings.utility,
            "eps_req": self.settings.eps_req,
        }
        quote = self._call(
            "pricing.quote",
            PricingRequest(scenario=scenario, mechanism=self.settings.mechanism),
            PricingResult,
        )
        names = quote.type_names
        payload = OpenRoundPayload(
            round_id=rnd.id,
            mechanism=quote.mechanism,
            price=from_micros(to_micros(quote.price)),
            rewards={
                n: from_micros(to_micros(r)) for n, r in zip(names, quote.rewards, strict=True)
            },
            target_participants=dict(zip(names, quote.participants, strict=True)),
            target_buyers=dict(zip(names, quote.buyers, strict=True)),
            epsilon=quote.epsilon,
            welfare=quote.welfare,
            incentive_cost=from_micros(to_micros(quote.incentive_cost)),
        )
        self._call("market.open_round", payload, _Json)
        self._move(
            rnd.id,
            S.OPEN,
            S.COLLECTING,
            f"error model: {source}",
            mechanism=quote.mechanism,
            scenario_json=json.dumps(scenario),
            type_clients_json=json.dumps({t.name: t.client_ids for t in population.types}),
            quote_json=quote.model_dump_json(),
            collect_deadline=time.time() + self.settings.collect_timeout_s,
        )
        return Step(S.COLLECTING)

    def _collect(self, rnd: Round) -> Step:
        seen = self._call("market.decisions", {"round_id": rnd.id}, RoundDecisions)
        deadline = rnd.collect_deadline or 0.0
        if seen.declared < seen.registered and time.time() < deadline:
            return Step(S.COLLECTING, self.settings.poll_interval_s)
        final = self._call("market.close_round", {"round_id": rnd.id}, RoundDecisions)
        scenario = json.loads(rnd.scenario_json or "{}")
        names = [t["name"] for t in scenario["types"]]
        k = [len(final.participants.get(n, [])) for n in names]
        b = [len(final.paid_buyers.get(n, [])) for n in names]
        if sum(k) == 0:  # no coalition: no model, so no schedule to price (ε is +∞ at K = 0)
            rule = "no participant joined: no model is trained; buyers are refunded"
            empty = {
                "type_names": names,
                "participants": k,
                "buyers": b,
                "price": None,
                "rewards": [0.0] * len(names),
                "welfare": 0.0,
                "epsilon": None,
                "incentive_cost": 0.0,
            }
            self._move(
                rnd.id,
                S.COLLECTING,
                S.FAILED,
                rule,
                rule=rule,
                decisions_json=final.model_dump_json(),
                terms_json=json.dumps(empty),
            )
            return Step(S.FAILED)
        mech = rnd.mechanism
        eq = self._call(
            "pricing.equilibrium",
            {"scenario": scenario, "mechanism": mech, "participants": k, "buyers": b},
            _Json,
        )
        terms = self._call(
            "pricing.quote",
            PricingRequest(scenario=scenario, mechanism=mech, participants=k, buyers=b),
            PricingResult,
        )
        fields = {
            "decisions_json": final.model_dump_json(),
            "terms_json": json.dumps({**terms.model_dump(mode="json"), "equilibrium": eq}),
        }
        self._move(rnd.id, S.COLLECTING, S.TRAINING, f"K={k} B={b}", **fields)
        return Step(S.TRAINING)

    def _train(self, rnd: Round) -> Step:
        terms = json.loads(rnd.terms_json or "{}")
        scenario = json.loads(rnd.scenario_json or "{}")
        k = [int(x) for x in terms["participants"]]
        sizes = [float(t["data_size"]) for t in scenario["types"]]
        node_types = [i for i, t in enumerate(scenario["types"]) for _ in range(t["count"])]
        try:
            outcome: TrainingOutcome = self.trainer.train(
                k, sizes, node_types, rnd.id, progress=lambda p: self._note_progress(rnd.id, p)
            )
        except Exception as exc:
            raise RoundFailure(
                f"training failed ({type(exc).__name__}: {exc}): buyers are refunded, "
                "no reward is paid"
            ) from exc
        decisions = RoundDecisions.model_validate_json(rnd.decisions_json or "{}")
        dropped: list[int] = []
        for i, name in enumerate(t["name"] for t in scenario["types"]):
            missing = k[i] - outcome.completed[i]
            if missing > 0:  # the rule names the last-registered joiners of the type as dropped
                dropped.extend(sorted(decisions.participants.get(name, []))[-missing:])
        if sum(outcome.completed) == 0:
            raise RoundFailure("every participant dropped out: buyers are refunded")
        training = {**outcome.as_dict(), "dropped": dropped}
        note = f"ε={outcome.epsilon:.4f} in {outcome.seconds:.1f}s"
        if dropped:
            note += f"; dropped out: {dropped}"
        self._move(rnd.id, S.TRAINING, S.EVALUATING, note, training_json=json.dumps(training))
        return Step(S.EVALUATING)

    def _note_progress(self, round_id: int, p: RoundProgress) -> None:
        """Record the training's latest FedAvg round on the round while it trains (the API shows
        it); best effort: a failed write is logged and training goes on."""
        body = json.dumps(training_progress(p))
        try:
            with self.sessions() as session, session.begin():
                session.execute(
                    update(Round)
                    .where(Round.id == round_id, Round.state == S.TRAINING.value)
                    .values(training_progress_json=body)
                )
        except Exception:
            log.warning("round %s: training progress not recorded", round_id, exc_info=True)

    def _evaluate(self, rnd: Round) -> Step:
        training = json.loads(rnd.training_json or "{}")
        scenario = json.loads(rnd.scenario_json or "{}")
        request = EvaluationRequest(
            round_id=rnd.id,
            artifact_path=training["artifact_path"],
            artifact_sha256=training["artifact_sha256"],
            participants=training["completed"],
            sizes=[float(t["data_size"]) for t in scenario["types"]],
            train_epsilon=training["epsilon"],
        )
        result = self._call("evaluation.evaluate", request, EvaluationResult)
        metrics.GENERALIZATION_ERROR.set(result.test_loss)
        self._move(
            rnd.id,
            S.EVALUATING,
            S.SETTLING,
            f"test loss {result.test_loss:.4f}",
            evaluation_json=result.model_dump_json(),
        )
        return Step(S.SETTLING)

    def _settle(self, rnd: Round) -> Step:
        terms = json.loads(rnd.terms_json or "{}")
        training = json.loads(rnd.training_json or "{}")
        decisions = RoundDecisions.model_validate_json(rnd.decisions_json or "{}")
        names = terms["type_names"]
        payload = SettlePayload(
            round_id=rnd.id,
            rewards={
                n: from_micros(to_micros(r)) for n, r in zip(names, terms["rewards"], strict=True)
            },
            participants=sorted(c for ids in decisions.participants.values() for c in ids),
            dropped=training.get("dropped", []),
            artifact_path=training["artifact_path"],
            artifact_sha256=training["artifact_sha256"],
        )
        settlement = self._call("market.settle_round", payload, SettleResult)
        self._call("market.publish", {"round_id": rnd.id}, _Json)
        summary = self._summary(rnd, terms, training, settlement, published=True)
        if self._move(
            rnd.id,
            S.SETTLING,
            S.PUBLISHED,
            "model published",
            settlement_json=settlement.model_dump_json(),
            summary_json=json.dumps(summary),
        ):
            self._observe(summary, S.PUBLISHED)
        return Step(None)

    def _settle_by_rule(self, rnd: Round) -> Step:
        settlement: SettleResult | None = None
        if rnd.quote_json is not None:  # the market opened the round: refund its buyers
            settlement = self._call(
                "market.settle_round",
                SettlePayload(round_id=rnd.id, rewards={}, participants=[], refund_buyers=True),
                SettleResult,
            )
        terms = json.loads(rnd.terms_json) if rnd.terms_json else None
        summary = self._summary(rnd, terms, None, settlement, published=False)
        if self._move(
            rnd.id,
            S.FAILED,
            S.SETTLED_BY_RULE,
            rnd.rule or "settled by rule",
            settlement_json=settlement.model_dump_json() if settlement else None,
            summary_json=json.dumps(summary),
        ):
            self._observe(summary, S.SETTLED_BY_RULE)
        return Step(None)

    # ------------------------------------------------------------------ reporting

    def _summary(
        self,
        rnd: Round,
        terms: dict[str, Any] | None,
        training: dict[str, Any] | None,
        settlement: SettleResult | None,
        published: bool,
    ) -> dict[str, Any]:
        """The round's figures (the keys the demo's summary.json carries, and more)."""
        now = datetime.now(UTC)
        created = rnd.created_at if rnd.created_at.tzinfo else rnd.created_at.replace(tzinfo=UTC)
        with self.sessions() as session:
            phases: dict[str, float] = {}
            for t in session.query(Transition).filter(Transition.round_id == rnd.id):
                phases[t.from_state] = phases.get(t.from_state, 0.0) + t.seconds_in_from
        entered = rnd.state_entered_at
        entered = entered if entered.tzinfo else entered.replace(tzinfo=UTC)
        phases[rnd.state] = phases.get(rnd.state, 0.0) + (now - entered).total_seconds()
        total = (now - created).total_seconds()
        evaluation = json.loads(rnd.evaluation_json) if rnd.evaluation_json else None
        names = terms["type_names"] if terms else []
        work = phases.get(S.TRAINING.value, 0.0) + phases.get(S.EVALUATING.value, 0.0)
        subsidy = Decimal(settlement.subsidy) if settlement else Decimal(0)
        return {
            "round_id": rnd.id,
            "state": S.PUBLISHED.value if published else S.SETTLED_BY_RULE.value,
            "rule": rnd.rule,
            "mechanism": rnd.mechanism,
            "participants": dict(zip(names, terms["participants"], strict=True)) if terms else {},
            "buyers": dict(zip(names, terms["buyers"], strict=True)) if terms else {},
            "price": terms["price"] if terms else None,
            "rewards": dict(zip(names, terms["rewards"], strict=True)) if terms else {},
            "welfare": terms["welfare"] if terms else None,
            "incentive_cost": float(subsidy),
            "incentive_cost_predicted": terms["incentive_cost"] if terms else None,
            "epsilon": evaluation["test_loss"] if evaluation else None,
            "epsilon_predicted": terms["epsilon"] if terms else None,
            "epsilon_training": training["epsilon"] if training else None,
            "equilibrium": (terms or {}).get("equilibrium", {}).get("equilibrium"),
            "round_seconds": total,
            "phase_seconds": phases,
            "platform_seconds": total - work,
            "platform_share": (total - work) / total if total > 0 else None,
            "training_round_seconds": training["round_seconds"] if training else [],
            "dropped": training.get("dropped", []) if training else [],
            "settlement": settlement.model_dump(mode="json") if settlement else None,
            "error_model_fit": evaluation.get("fit") if evaluation else None,
        }

    def _observe(self, summary: dict[str, Any], state: RoundState) -> None:
        """Export the round's figures as Prometheus gauges."""
        metrics.ROUNDS.labels(state.value).inc()
        metrics.ROUND_DURATION.observe(summary["round_seconds"])
        if summary["platform_share"] is not None:
            metrics.PLATFORM_OVERHEAD_RATIO.set(summary["platform_share"])
        metrics.INCENTIVE_COST.set(summary["incentive_cost"])
        if summary["price"] is not None:
            metrics.MODEL_PRICE.set(summary["price"])
            metrics.SOCIAL_WELFARE.set(summary["welfare"])
        for name, value in summary["rewards"].items():
            metrics.REWARD.labels(name).set(value)
        for name, value in summary["participants"].items():
            metrics.PARTICIPANTS.labels(name).set(value)
        for name, value in summary["buyers"].items():
            metrics.BUYERS.labels(name).set(value)
        if summary["epsilon"] is not None:
            metrics.GENERALIZATION_ERROR.set(summary["epsilon"])
