"""What a round of one task prices with: the task's own economics (issue 36).

Each task's file (:mod:`mots.tasks.task_file`, looked up by name in ``$MOTS_TASKS_DIR`` and
``examples/tasks/``) declares its market: U(ε), ε_req and the prior of Eq. 3 (its
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
from mots.tasks.task_file import MarketTask, load_task
from services.orchestration.core.config import Settings


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


class UnknownTask(LookupError):
    """A round was asked for a task with no task file (its message names the ``task`` field)."""


@lru_cache(maxsize=64)
def task_file(name: str) -> MarketTask:
    """The task file of that name (read once per process); :class:`UnknownTask` if none."""
    from mots.tasks.task_file import TaskFileError

    try:
        return load_task(name)
    except TaskFileError as exc:
        rules = "; ".join(rule for _, rule in exc.fields)
        raise UnknownTask(f"task: {name!r} cannot be trained here: {rules}") from exc


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
    spec = task_file(task)
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


def check_task(task: str) -> None:
    """Refuse a task no round can train (:class:`UnknownTask`, naming ``task``): the default
    task always exists; any other needs its task file."""
    if task != DEFAULT_TASK:
        task_file(task)
