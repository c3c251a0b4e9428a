"""The market's task bodies (``/v1/tasks``, issue 36): a task file's content in, a stored task out.

A task is what the market trains and sells (:mod:`mots.tasks.task_file`); the market keeps each
version the operator created, and everything per task (enrolment codes, rounds, their quotes,
declarations, purchases, pool accounts, published models) names one. Before tasks existed the
market sold one model: :data:`DEFAULT_TASK` is that task, the one a call naming none acts in.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

from pydantic import Field

from mots.platform.api.base import Schema, example
from mots.platform.timestamps import Timestamp

DEFAULT_TASK = "fashion-mnist"
"""The task of every call that names none, and of everything stored before tasks (migration 0011)."""

TASK_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
TaskName = Annotated[
    str,
    Field(min_length=1, max_length=63, pattern=TASK_NAME_PATTERN, description="a task's name"),
]
"""A task's name as a request gives it: the task file's lower-case slug."""

MAX_TASK_FILE_CHARS = 65_536
"""Longest task file the market accepts (64 Ki characters; the shipped ones are under 4 KiB):
even written as JSON escapes (6 bytes a character) it stays under the 1 MiB body limit, so an
over-long file is the 422 naming ``content``, never the body's 413."""

TASK_FILE_EXAMPLE = """name: digits
version: 1
description: Recognise hand-written digits from 8x8 scans.
data: {format: npz, input_shape: [1, 8, 8], dtype: uint8, scale: 16.0,
       labels: ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"], public: sklearn-digits}
model: {architecture: mlp, args: {hidden: [32]}, init: random}
economics:
  scenario:
    types: [{name: type-1, count: 5, data_size: 20, cost: 0.2}]
    error_model: {eps0: 0.4, d_gamma2: 8.0, sigma2: 0.0}
    utility: {kind: power, scale: 2.0, exponent: 2.0}
  subsidy_budget: 20.0
rounds: {collection_window_s: 30, fedavg_rounds: 10}
evaluation: {public: sklearn-digits}
"""


class OfTask(Schema):
    """A body of something that belongs to one task (a client, an enrolment code)."""

    task: str = Field(DEFAULT_TASK, description="the task it belongs to (issue 36)")


class TaskStatus(enum.StrEnum):
    """A stored task's standing: ``retired`` takes no new enrolment codes or rounds."""

    ACTIVE = "active"
    RETIRED = "retired"


class TaskIn(Schema):
    """A task file's content (YAML or JSON text) as the operator creates a task, or a new version
    of one, from it: its scenario inline (`mots tasks create FILE` inlines a scenario file)."""

    model_config = example({"content": TASK_FILE_EXAMPLE})

    content: str = Field(
        ...,
        min_length=1,
        max_length=MAX_TASK_FILE_CHARS,
        description="the task file's text (docs/tasks.md); a malformed one is refused with every "
        "problem listed by field, and nothing is stored",
    )


class TaskOut(Schema):
    """A stored version of a task: what its file declares, validated, and the file as sent."""

    model_config = example(
        {
            "name": "digits",
            "version": 1,
            "status": "active",
            "description": "Recognise hand-written digits from 8x8 scans.",
            "created_at": "2026-11-29T09:40:00Z",
            "spec": {"name": "digits", "version": 1, "model": {"architecture": "mlp"}},
            "content": TASK_FILE_EXAMPLE,
        }
    )

    name: str
    version: int = Field(..., ge=1)
    status: TaskStatus
    description: str
    created_at: Timestamp
    spec: dict[str, Any] = Field(..., description="the task as validated (every default filled)")
    content: str = Field(..., description="the task file's text as the operator sent it")


class TaskVersions(Schema):
    """Every stored version of one task, oldest first."""

    versions: list[TaskOut]
