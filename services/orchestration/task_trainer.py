"""A task's demo devices' data folders, and the in-process fallback of a task's round (issue 36).

Every task's round trains on the Flower federation
(:class:`services.orchestration.trainer.Trainer`, :mod:`mots.training.task_run`); the local
federation's nodes hold the platform's demo devices' data: ``mots data split`` of the task's
public set (:func:`mots.tasks.split.split_public`) cut once per population (D_i and N_i per
type) under ``MOTS_FEDERATION_DIR/data/<task>/``, client j of type i holding folder
``type-<i+1>-<j>`` (:func:`device_folders`, handed to ``LocalFederation(task_data=…)``). Where
``MOTS_DEVICE_DATA_DIR`` holds a folder of the task, its devices train on those folders instead
(:func:`own_folders`: the participants' own data, laid out as ``mots data split`` writes it; a
task with no public set, such as one a test writes, has no other).

The fallback, with ``MOTS_TRAINER=inprocess`` only (as the default task then trains in process
too): :func:`train_task_round` runs the task's file (its ``model``, ``rounds`` and evaluation
data) through :func:`mots.tasks.training.train_task`, FedAvg over the same folders in this
process, and writes the task's model file (``mots-model/2``, which a buyer scores with PyTorch
alone).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mots.economics.scenario import ClientType
from mots.platform.contracts import TrainRequest, TrainResult
from mots.tasks.task_file import MarketTask
from services.orchestration.core.config import Settings
from services.orchestration.rounds.task_economics import task_file
from services.orchestration.trainer import participant_outcomes

_LOCK = threading.Lock()
"""One split at a time per process (two rounds of one task never cut the same folders twice)."""


def population_task(task: MarketTask, request: TrainRequest) -> MarketTask:
    """The task with the round's population as its client types (D_i, N_i per type): what the
    folders are cut for and checked against (each must hold at least its type's D_i)."""
    names = request.type_names or [f"type-{i + 1}" for i in range(len(request.sizes))]
    types = [
        ClientType(name=n, count=max(1, request.node_types.count(i)), data_size=d, cost=0.0)
        for i, (n, d) in enumerate(zip(names, request.sizes, strict=True))
    ]
    scenario = task.economics.scenario.model_copy(update={"types": types})
    return task.model_copy(
        update={"economics": task.economics.model_copy(update={"scenario": scenario})}
    )


def data_folders(task: MarketTask, root: Path) -> Path:
    """The folder holding one data folder per device of the task's population (its client
    types' D_i and N_i), cut once from the task's public set, then reused:
    ``root/<task>/<D>x<N>_…`` with client j of type i in ``type-<i+1>-<j>``."""
    types = task.economics.scenario.types
    key = "_".join(f"{int(t.data_size)}x{t.count}" for t in types)
    out = root / task.name / key
    done = out / ".complete"
    with _LOCK:
        if not done.exists():
            from mots.tasks.split import split_public

            sizes = tuple(int(t.data_size) for t in types)
            split_public(task, out, sizes=sizes, counts=tuple(t.count for t in types))
            done.write_text("split by mots.tasks.split.split_public\n")
    return out


def own_folders(settings: Settings, name: str) -> Path | None:
    """``MOTS_DEVICE_DATA_DIR/<name>`` where it is a folder: client j of type i's own data in
    ``type-<i+1>-<jjj>`` (:func:`mots.tasks.split.folder_name`); else None."""
    if not settings.device_data_dir:
        return None
    root = Path(settings.device_data_dir) / name
    return root if root.is_dir() else None


def device_folders(
    name: str,
    root: Path,
    sizes: list[float],
    node_types: list[int],
    settings: Settings | None = None,
    version: int | None = None,
) -> str:
    """:func:`data_folders` of task ``name`` for a local federation's nodes (``node_types``: each
    node's type index, D_i per type ``sizes``): the root ``LocalFederation(task_data=…)`` hands
    each node (its ``data-<task>`` folder); the devices' own (:func:`own_folders`) where
    ``settings`` has them for the task. ``version``: the task's version the round is pinned to."""
    own = None if settings is None else own_folders(settings, name)
    if own is not None:
        return str(own)
    types = [
        ClientType(name=f"type-{i + 1}", count=node_types.count(i), data_size=d, cost=0.0)
        for i, d in enumerate(sizes)
    ]
    task = task_file(name, settings, version)
    scenario = task.economics.scenario.model_copy(update={"types": types})
    economics = task.economics.model_copy(update={"scenario": scenario})
    return str(data_folders(task.model_copy(update={"economics": economics}), root))


def train_task_round(settings: Settings, request: TrainRequest) -> TrainResult:
    """Train the round's coalition (K_i per type: folders ``type-<i+1>-0 … K_i−1``) on the task's
    model (at the version the round was opened on) and write its model file under ``MOTS_ARTIFACT_DIR/round-<id>/``."""
    from mots.tasks.split import folder_name
    from mots.tasks.training import train_task

    task = population_task(task_file(request.task, settings, request.task_version), request)
    root = own_folders(settings, task.name) or data_folders(
        task, Path(settings.federation_dir) / "data"
    )
    folders = [
        (i, root / folder_name(i, j)) for i, k in enumerate(request.participants) for j in range(k)
    ]
    out = Path(settings.artifact_dir) / f"round-{request.round_id}" / "model.pt"
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    model = train_task(task, folders, out)
    seconds = time.perf_counter() - start
    rounds = len(model.losses)
    metadata = {
        "engine": "tasks-inprocess",
        "task": {"name": task.name, "version": task.version},
        "accuracy": model.accuracy,
        "participants": list(request.participants),
    }
    return TrainResult(
        epsilon=model.epsilon,
        losses=model.losses,
        round_seconds=[seconds / max(rounds, 1)] * rounds,
        artifact_path=str(model.path),
        artifact_sha256=model.sha256,
        completed=list(request.participants),
        seconds=seconds,
        metadata=metadata,
        participants=participant_outcomes({}, request.participants, request),
    )
