"""A task by name wherever it is defined (issue 36): its task file, else the document the market
stores for it (``mots tasks create FILE`` → ``POST /v1/tasks``), read from the market's REST API
with the SDK's :class:`~mots.client.market.MarketClient` and validated by the same model
(:func:`mots.tasks.task_file.parse_task_text`) as the market validated it.

The market's latest stored version is the task's current one (a new version brings a retired task
back, :mod:`services.market.tasks`); a retired task is :class:`TaskRetired`, so no new round of it
opens. The orchestration (API, round steps, training worker) and the evaluation worker look tasks
up through here, so a market-only task is priced, trained and measured like a shipped one.

A round is pinned to the task's version at its open (:func:`pinned_task`): every later step reads
exactly that version, the market's stored one by ``GET /v1/tasks/{name}?version=N`` (cached per
(name, version): a stored version never changes), so a version stored mid-round applies to the
next round only. A task file whose ``version:`` no longer matches the pin is
:class:`TaskVersionChanged`: the round fails and is settled by rule rather than mix versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from mots.tasks.task_file import MarketTask, TaskFileError, load_task, parse_task_text


class TaskNotFound(LookupError):
    """No task file and no stored task of that name; the message names the ``task`` field."""


class TaskRetired(TaskNotFound):
    """The market stores the task retired: it takes no new rounds (a 409 naming ``task``)."""


class TaskSourceUnavailable(TaskNotFound):
    """No task file of that name, and the market could not be asked (a 503, not a 404)."""


class TaskVersionChanged(TaskNotFound):
    """The task file now declares another version than the one its round was opened on: the
    round is failed (settled by rule, buyers refunded) rather than priced on one version and
    trained or measured on another."""


@dataclass(frozen=True)
class StoredTask:
    """A task as the market stores it: its current (latest) version, validated, and whether
    the operator retired it."""

    task: MarketTask
    version: int
    retired: bool


def stored_task(
    name: str,
    market_url: str,
    token: str,
    timeout_s: float = 10.0,
    version: int | None = None,
) -> StoredTask | None:
    """The market's current version of task ``name``, or its stored ``version`` (None if it stores
    none); the stored text is validated again here, so a document that does not validate names
    its fields."""
    from mots.client.errors import MarketError
    from mots.client.market import MarketClient
    from mots.platform.api.tasks import TaskStatus

    client = MarketClient(market_url, token, timeout_s=timeout_s, retries=1)
    try:
        out = client.task(name, version)
    except MarketError as exc:
        if exc.status == 404:
            return None
        raise TaskSourceUnavailable(
            f"task: {name!r}: the market could not be asked ({exc})"
        ) from exc
    finally:
        client.close()
    task = parse_task_text(out.content, f"the market's task {name!r} version {out.version}")
    if task.name != name:  # the market stores a task under its file's name; never another's
        raise TaskNotFound(f"task: the market's {name!r} declares the name {task.name!r}")
    return StoredTask(task, out.version, out.status == TaskStatus.RETIRED)


def file_task(name: str) -> MarketTask | None:
    """Task ``name``'s file in :func:`mots.tasks.task_file.task_dirs`, or None if none names it;
    a file that is there but malformed is :class:`TaskNotFound` listing its problems."""
    try:
        return load_task(name)
    except TaskFileError as exc:
        if any(field == "(task)" and "no task file" in rule for field, rule in exc.fields):
            return None
        rules = "; ".join(rule for _, rule in exc.fields)
        raise TaskNotFound(f"task: {name!r} cannot be trained here: {rules}") from exc


def retired(name: str) -> TaskRetired:
    """The refusal of a new round of task ``name``, which the market stores retired."""
    return TaskRetired(
        f"task: {name!r} is retired at the market; it takes no new rounds (POST /v1/tasks with "
        "a higher version brings it back)"
    )


def resolve_task(
    name: str, market_url: str | None, token: str, *, refuse_retired: bool = False
) -> MarketTask:
    """Task ``name``'s definition: its task file, else the market's stored current version
    (``market_url`` unset: files only). ``refuse_retired``: a task the market stores retired is
    :class:`TaskRetired` even where a file defines it (a new round must not open)."""
    found = file_task(name)
    stored = None
    if market_url and (found is None or refuse_retired):
        try:
            stored = stored_task(name, market_url, token)
        except TaskSourceUnavailable:
            if found is None:
                raise
    if stored is not None and stored.retired and refuse_retired:
        raise retired(name)
    if found is not None:
        return found
    if stored is not None:
        return stored.task
    where = "no task file" + (" and the market stores none" if market_url else "")
    raise TaskNotFound(f"task: {name!r} cannot be trained here: {where} of that name")


@lru_cache(maxsize=64)
def _stored_version(name: str, version: int, market_url: str, token: str) -> MarketTask:
    """Version ``version`` of the market's task ``name``, asked once per process: a stored
    version never changes (a new one numbers above it). A failure is not cached."""
    stored = stored_task(name, market_url, token, version=version)
    if stored is None:
        raise TaskNotFound(f"task: the market stores no version {version} of {name!r}")
    return stored.task


def pinned_task(name: str, version: int | None, market_url: str | None, token: str) -> MarketTask:
    """Task ``name`` at the ``version`` its round was opened on (None: a round opened before
    versions were pinned, read as :func:`resolve_task` reads the latest). A task file is used
    while it declares that version; one that declares another is :class:`TaskVersionChanged`
    (the round must not mix versions); a market-only task's version is read from the market
    (``GET /v1/tasks/{name}?version=N``, cached)."""
    if version is None:
        return resolve_task(name, market_url, token)
    found = file_task(name)
    if found is not None:
        if found.version != version:
            raise TaskVersionChanged(
                f"task: the task file of {name!r} now declares version {found.version}, but the "
                f"round was opened on version {version}; a round never mixes two versions, so it "
                "is settled by rule (the next round uses the new version)"
            )
        return found
    if not market_url:
        raise TaskNotFound(f"task: {name!r} cannot be trained here: no task file of that name")
    return _stored_version(name, version, market_url, token)
