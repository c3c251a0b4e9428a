"""The market's Celery worker: the round operations the orchestration service calls.

Run with ``celery -A services.market.worker worker -Q market --pool=solo``.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from mots.platform.api.rounds import SettleResult
from mots.platform.contracts import (
    MARKET_CLOSE_ROUND,
    MARKET_DECLARATION_PROGRESS,
    MARKET_NODE_KEYS,
    MARKET_OPEN_ROUND,
    MARKET_POPULATION,
    MARKET_SETTLE_ROUND,
    DeclarationProgress,
    MarketRoundStatus,
    NodeKeys,
    NodeKeysRequest,
    OpenRoundPayload,
    Population,
    PopulationRequest,
    RoundDecisions,
    RoundRef,
    SettlePayload,
)
from mots.platform.db import in_transaction, make_engine, make_read_sessionmaker, make_sessionmaker
from mots.platform.worker import service_worker
from services.market import node_keys, rounds
from services.market.core.config import get_settings
from services.market.migrations import upgrade

settings = get_settings()
app = service_worker("market", settings, migrate=lambda: upgrade(settings.database_url))
_engine = make_engine(settings.database_url, settings.db_pool_size)
_sessions = make_sessionmaker(_engine)
_reads = make_read_sessionmaker(_engine)  # SQLite: without the write lock


@MARKET_POPULATION.handler(app)
def population(ref: PopulationRequest) -> Population:
    """The round's population (its task's active clients) grouped by type, snapshotted as its
    members (the same on a repeated call); a task the market does not store, or has retired, is
    refused naming ``task`` (the round fails by rule, touching no other task's round)."""
    return in_transaction(_sessions, lambda s: rounds.population(s, ref.round_id, ref.task))


@MARKET_NODE_KEYS.handler(app)
def keys(request: NodeKeysRequest) -> NodeKeys:
    """The SuperNode public keys the given clients registered; with a round, also every
    member's, and the members per type."""

    def read(session: Session) -> NodeKeys:
        if request.round_id is None:
            return node_keys.keys_of(session, request.client_ids)
        members = rounds.members_of(session, request.round_id)
        everyone = sorted({*request.client_ids, *(c for ids in members.values() for c in ids)})
        found = node_keys.keys_of(session, everyone)
        return found.model_copy(update={"members": members})

    return in_transaction(_reads, read)


@MARKET_OPEN_ROUND.handler(app)
def open_round(quote: OpenRoundPayload) -> MarketRoundStatus:
    """Publish a round's quote; the market starts collecting decisions."""
    rnd = in_transaction(_sessions, lambda s: rounds.open_round(s, quote))
    return MarketRoundStatus(round_id=rnd.id, state=rnd.state)


@MARKET_DECLARATION_PROGRESS.handler(app)
def declaration_progress(ref: RoundRef) -> DeclarationProgress:
    """How many clients have declared against the round's population (counters only); a read
    whose connection dropped (the database restarted, ``pg_terminate_backend``) is retried like a
    write (:func:`in_transaction`), so the round's poll does not fail (issue 37)."""
    return in_transaction(_reads, lambda s: rounds.progress(s, ref.round_id))


@MARKET_CLOSE_ROUND.handler(app)
def close_round(ref: RoundRef) -> RoundDecisions:
    """Stop taking decisions and purchases; return the final decisions with the round's members
    and their SuperNode keys (the market owns both: training needs them, nothing else asks)."""

    def close(session: Session) -> RoundDecisions:
        final = rounds.close_round(session, ref.round_id)
        members = rounds.members_of(session, ref.round_id)
        joined = (c for ids in final.participants.values() for c in ids)
        everyone = sorted({*joined, *(c for ids in members.values() for c in ids)})
        keys = node_keys.keys_of(session, everyone).keys
        return final.model_copy(update={"members": members, "node_keys": keys})

    return in_transaction(_sessions, close)


@MARKET_SETTLE_ROUND.handler(app)
def settle_round(payload: SettlePayload) -> SettleResult:
    """Book the round's rewards, charges, refunds, subsidy and surplus (idempotent) and, with a
    model artifact, publish the round in the same transaction: one call settles and publishes."""

    def settle(session: Session) -> SettleResult:
        result = rounds.settle_round(session, payload, settings.round_subsidy_budget)
        if payload.artifact_path and not payload.refund_buyers:
            rounds.publish(session, payload.round_id)
        return result

    return in_transaction(_sessions, settle)
