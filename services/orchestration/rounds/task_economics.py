"""What a round of one task prices with: the task's own economics (issue 36).

Each task's file (:mod:`mots.tasks.task_file`, looked up by name in ``$MOTS_TASKS_DIR`` and
``examples/tasks/``; for a task created only at the market, the document it stores, read from its
REST API: :mod:`mots.tasks.stored`) declares its market: U(ε), ε_req and the prior of Eq. 3 (its
``economics.scenario``), the mechanism, the subsidy budget, and its collection window
(``rounds.collection_window_s``). A round of the default task (``fashion-mnist``, the one model the
platform sold before tasks) keeps reading the deployment's settings (MOTS_UTILITY, MOTS_EPS_REQ,
MOTS_PRIOR_ERROR_MODEL, MOTS_MECHANISM, MOTS_ROUND_SUBSIDY_BUDGET, MOTS_COLLECT_TIMEOUT_S), so an
upgraded deployment prices exactly as it did. Either way the population (N_i, D_i, C_i) is the
market's: the task's registered clients, never the file's example types.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from mots.platform.api.tasks import DEFAULT_TASK
from mots.tasks.stored import (
    TaskNotFound,
    TaskSourceUnavailable,
    file_task,
    resolve_task,
    retired,
    stored_task,
)
from mots.tasks.task_file import MarketTask
from services.orchestration.core.config import Settings, get_settings


@dataclass(frozen=True)
class TaskEconomics:
    """One task's market terms, as a round of it prices them."""

    task: str
    utility: dict[str, Any]
    eps_req: float | None
    prior: dict[str, float]
    """The ε prior (Eq. 3's ε0, dγ², σ²) until the task's own rounds are measured."""
    mechanism: str
    subsidy_budget: Decimal
    collect_seconds: float
    learned_online: bool = True
    """Whether the task's measured rounds refine its ε prior (else the prior is used as is)."""


UnknownTask = TaskNotFound
"""A round was asked for a task no task file and no stored task defines (its message names the
``task`` field): a 404; :class:`~mots.tasks.stored.TaskRetired` a 409,
:class:`~mots.tasks.stored.TaskSourceUnavailable` a 503."""


class _NoFile(LookupError):
    """No task file of that name (not cached: a file added later is found)."""


@lru_cache(maxsize=64)
def _file(name: str) -> MarketTask:
    """The task file of that name, read once per process; a malformed one is
    :class:`UnknownTask` listing its problems."""
    found = file_task(name)
    if found is None:
        raise _NoFile(name)
    return found


def task_file(name: str, settings: Settings | None = None) -> MarketTask:
    """Task ``name``'s definition: its task file (read once per process), else the current
    version the market stores (``MOTS_MARKET_INTERNAL_URL``, read each time: a new version or a
    retirement counts at once); :class:`UnknownTask` if neither defines it."""
    try:
        return _file(name)
    except _NoFile:
        s = settings or get_settings()
        return resolve_task(name, s.market_internal_url, s.operator_token.get_secret_value())


def economics_of(task: str, settings: Settings) -> TaskEconomics:
    """The economics a round of ``task`` prices with: the deployment's settings for the default
    task, else the task file's ``economics`` and ``rounds.collection_window_s``."""
    if task == DEFAULT_TASK:
        return TaskEconomics(
            task=task,
            utility=dict(settings.utility),
            eps_req=settings.eps_req,
            prior=dict(settings.prior_error_model),
            mechanism=settings.default_mechanism,
            subsidy_budget=settings.round_subsidy_budget,
            collect_seconds=settings.collect_timeout_s,
        )
    spec = task_file(task, settings)
    scenario = spec.economics.scenario
    return TaskEconomics(
        task=task,
        utility=scenario.utility.model_dump(mode="json"),
        eps_req=scenario.eps_req,
        prior=scenario.error_model.model_dump(mode="json"),
        mechanism=spec.economics.mechanism,
        subsidy_budget=Decimal(str(spec.economics.subsidy_budget)),
        collect_seconds=spec.rounds.collection_window_s,
        learned_online=spec.economics.learned_online,
    )


def check_task(task: str, settings: Settings | None = None) -> None:
    """Refuse a task no round can train: :class:`UnknownTask` (no task file, none stored; the
    default task always exists), :class:`~mots.tasks.stored.TaskRetired` (the market stores it
    retired), each naming ``task``."""
    s = settings or get_settings()
    url, token = s.market_internal_url, s.operator_token.get_secret_value()
    if task != DEFAULT_TASK:
        resolve_task(task, url, token, refuse_retired=True)
        return
    if url:  # the deployment's settings define it, but the operator may have retired it
        try:
            stored = stored_task(task, url, token)
        except TaskSourceUnavailable:
            return  # the market's own check refuses it at the open if so
        if stored is not None and stored.retired:
            raise retired(task)
