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

A round reads the task's version it was opened on (``rounds.task_version``, pinned by
:func:`check_task` at ``POST /v1/rounds``; :func:`mots.tasks.stored.pinned_task`), so a version
stored mid-round never prices, trains or measures a round opened before it.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from mots.platform.api.tasks import DEFAULT_TASK
from mots.tasks.stored import (
    TaskNotFound,
    TaskSourceUnavailable,
    file_task,
    pinned_task,
    resolve_task,
    retired,
    stored_task,
)
from mots.tasks.task_file import MarketTask, TaskFileError, find_task_file
from services.orchestration.core.config import Settings, get_settings

log = logging.getLogger(__name__)


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
def _file_at(name: str, path: str, mtime_ns: int) -> MarketTask:
    """The task file of that name as it was at ``mtime_ns``, read once per process and change;
    a malformed one is :class:`UnknownTask` listing its problems."""
    found = file_task(name)
    if found is None:
        raise _NoFile(name)
    return found


def _file(name: str) -> MarketTask:
    """The task file of that name, read again only once it has changed on disk (so an edited
    file's new ``version:`` is seen, and a round pinned to the old one is not mixed)."""
    try:
        path = find_task_file(name)
        mtime_ns = path.stat().st_mtime_ns
    except (TaskFileError, OSError):
        raise _NoFile(name) from None
    return _file_at(name, str(path), mtime_ns)


def task_file(
    name: str, settings: Settings | None = None, version: int | None = None
) -> MarketTask:
    """Task ``name``'s definition: its task file (read once per change), else the market's stored
    one (``MOTS_MARKET_INTERNAL_URL``). ``version``: the version the round was pinned to at its
    open (:func:`mots.tasks.stored.pinned_task`: exactly that version, or
    :class:`~mots.tasks.stored.TaskVersionChanged` if the file now declares another); None: the
    current version (read each time: a new version or a retirement counts at once).
    :class:`UnknownTask` if neither defines it."""
    s = settings or get_settings()
    url, token = s.market_internal_url, s.operator_token.get_secret_value()
    try:
        found = _file(name)
    except _NoFile:
        if version is None:
            return resolve_task(name, url, token)
        return pinned_task(name, version, url, token)
    if version is not None and found.version != version:
        return pinned_task(name, version, url, token)  # raises TaskVersionChanged, naming both
    return found


def economics_of(task: str, settings: Settings, version: int | None = None) -> TaskEconomics:
    """The economics a round of ``task`` prices with: the deployment's settings for the default
    task, else the ``economics`` and ``rounds.collection_window_s`` of the task's ``version``
    the round was opened on (None: the current one)."""
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
    spec = task_file(task, settings, version)
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


def check_task(task: str, settings: Settings | None = None) -> int | None:
    """The version a new round of ``task`` is pinned to (its task file's ``version:``, else the
    market's current stored version; the default task: its file's, or None without one), or a
    refusal: :class:`UnknownTask` (no task file, none stored; the default task always exists),
    :class:`~mots.tasks.stored.TaskRetired` (the market stores it retired), each naming ``task``."""
    s = settings or get_settings()
    url, token = s.market_internal_url, s.operator_token.get_secret_value()
    if task != DEFAULT_TASK:
        return resolve_task(task, url, token, refuse_retired=True).version
    try:
        found: MarketTask | None = _file(task)
    except _NoFile:
        found = None
    except TaskNotFound as exc:  # the deployment's settings price and train it, not its file
        log.warning("round of %s pinned to no version: its task file is unusable (%s)", task, exc)
        found = None
    stored = None
    if url:  # the deployment's settings define it, but the operator may have retired it
        with suppress(TaskSourceUnavailable):  # the market's own check refuses it if so
            stored = stored_task(task, url, token)
        if stored is not None and stored.retired:
            raise retired(task)
    if found is not None:
        return found.version
    return None if stored is None else stored.version
