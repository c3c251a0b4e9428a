"""Train a task on participants' own data folders, in process, to a model file.

FedAvg as Section 5 runs it and as every engine of :mod:`mots.training` does: each round every
participant runs E SGD steps of batch b from the global model at η_r = η0/(1+r)
(:func:`mots.training.local.train_local` on the mini-batches of
:func:`mots.training.local.batch_indices`), and the updates are averaged uniformly (Eq. 3) or by
D_k/ΣD (Eq. 2) (:func:`mots.training.fedavg.aggregation_weights`). The model is the task's
architecture built from its plain-data network, so the model file (format ``mots-model/1``,
docs/training.md) rebuilds with PyTorch alone. ε is the model's mean cross-entropy on the
platform's evaluation data (the task's ``evaluation``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from mots.tasks.local_data import load_for_training, preprocess, read_folder
from mots.tasks.public import load_public
from mots.tasks.task_file import MarketTask

if TYPE_CHECKING:
    from mots.training.config import TrainConfig

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TaskModel:
    """A trained task's model file and what it measured."""

    path: Path
    sha256: str
    epsilon: float
    accuracy: float
    losses: list[float]


def evaluation_data(task: MarketTask, base: Path | None = None) -> tuple[FloatArray, np.ndarray]:
    """The platform's evaluation inputs (preprocessed) and labels for ``task``."""
    if task.evaluation.public is not None:
        public = load_public(task.evaluation.public)
        return preprocess(task.data, public.x_test), public.y_test
    folder = Path(task.evaluation.path or "")
    if base is not None and not folder.is_absolute():
        folder = base / folder
    x, y, problems = read_folder(task.data, folder)
    if problems:
        raise ValueError(f"task {task.name}: evaluation data {folder}: " + "; ".join(problems))
    return preprocess(task.data, x), y


def evaluate_model_file(
    task: MarketTask, path: str | Path, base: Path | None = None
) -> tuple[float, float]:
    """(ε, accuracy) of a task's model file on the platform's evaluation data for the task: ε
    the mean cross-entropy, the loss Eq. 3 models (what the evaluation service measures)."""
    import torch

    from mots.training.artifacts import platform_model
    from mots.training.local import evaluate, torch_threads

    x, y = evaluation_data(task, base)
    model = platform_model(path)
    with torch_threads(1):
        loss, accuracy = evaluate(model, torch.from_numpy(x), torch.from_numpy(y))
    return float(loss), float(accuracy)


def model_metadata(task: MarketTask, participants: Sequence[int], rounds: int) -> dict[str, Any]:
    """The model file's metadata for a task: what a buyer needs to use it with PyTorch alone."""
    offset, scale = task.data.offset, task.data.scale
    return {
        "task": {"name": task.name, "version": task.version},
        "dataset": task.name,
        "model": task.model.architecture,
        "network": task.network(),
        "input_shape": list(task.data.input_shape),
        "num_classes": task.data.num_classes,
        "class_names": list(task.data.labels),
        "data_format": task.data.model_dump(mode="json", include={"format", "dtype", "csv"}),
        "preprocessing": {
            "dtype": "float32",
            "offset": offset,
            "divide_by": scale,
            "formula": "x = (inputs.float() - offset) / divide_by",
        },
        "participants": [int(k) for k in participants],
        "rounds": rounds,
        "aggregation": task.rounds.aggregation,
    }


def train_task(
    task: MarketTask,
    folders: Sequence[tuple[int, str | Path]],
    out: str | Path,
    *,
    seed: int = 0,
    rounds: int | None = None,
    evaluation_base: Path | None = None,
) -> TaskModel:
    """FedAvg over the participants' folders, each given as (type index, folder); each folder
    must fit the task and hold at least its type's D_i. Writes the final model to ``out``."""
    import torch

    from mots.client.model_file import build_network
    from mots.training.artifacts import save_artifact
    from mots.training.fedavg import RunningAverage, aggregation_weights, learning_rate
    from mots.training.local import ClientData, batch_indices, evaluate, torch_threads, train_local

    types = task.economics.scenario.types
    data = []
    for pid, (i, folder) in enumerate(folders):
        x, y = load_for_training(task.name, task.data, folder, int(types[i].data_size))
        data.append(ClientData(torch.from_numpy(x), torch.from_numpy(y), pid))
    x_eval, y_eval = evaluation_data(task, evaluation_base)
    xt, yt = torch.from_numpy(x_eval), torch.from_numpy(y_eval)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_network(task.network())
    if task.model.init == "zero":
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()  # w0 = 0 as in the paper (Section 5)
    names = list(model.state_dict().keys())
    weights = [v.detach().numpy().copy() for v in model.state_dict().values()]
    spec = task.rounds
    share = aggregation_weights([cd.size for cd in data], spec.aggregation)
    n_rounds = rounds or spec.fedavg_rounds
    losses = []
    with torch_threads(1):
        for r in range(n_rounds):
            average = RunningAverage()
            for cd, w in zip(data, share, strict=True):
                model.load_state_dict(
                    {n: torch.from_numpy(a) for n, a in zip(names, weights, strict=True)}
                )
                idx = batch_indices(seed, r, cd.pid, cd.size, spec.local_steps, spec.batch_size)
                train_local(model, cd, idx, learning_rate(spec.lr, r))
                average.add([v.detach().numpy() for v in model.state_dict().values()], float(w))
            weights = average.result()
            model.load_state_dict(
                {n: torch.from_numpy(a) for n, a in zip(names, weights, strict=True)}
            )
            losses.append(evaluate(model, xt, yt)[0])
    epsilon, accuracy = evaluate(model, xt, yt)
    counts = [sum(1 for i, _ in folders if i == t) for t in range(len(types))]
    meta = {
        **model_metadata(task, counts, n_rounds),
        "round": n_rounds,
        "epsilon": float(epsilon),
        "accuracy": float(accuracy),
        "seed": seed,
        "engine": "tasks-inprocess",
        "test_metric": {
            "name": task.metric.name,
            "value": float(accuracy) if task.metric.name == "accuracy" else float(epsilon),
            "loss": float(epsilon),
            "split": "evaluation",
            "samples": len(y_eval),
        },
    }
    digest = save_artifact(out, names, weights, meta)
    return TaskModel(Path(out), digest, float(epsilon), float(accuracy), losses)


def task_round_metadata(
    task: MarketTask,
    participants: Sequence[int],
    round_index: int,
    epsilon: float,
    accuracy: float,
    samples: int,
    config: TrainConfig,
) -> dict[str, Any]:
    """A round's model file metadata for ``task`` (the task's ``mots-model/2``): what
    :func:`train_task` writes, with the round and what it measured on the
    platform's evaluation data (the ``test_metric`` a buyer's classify.py checks)."""
    value = float(accuracy) if task.metric.name == "accuracy" else float(epsilon)
    return {
        **model_metadata(task, participants, config.rounds),
        "round": round_index + 1,
        "epsilon": float(epsilon),
        "accuracy": float(accuracy),
        "seed": config.seed,
        "engine": "deployment",
        "config": config.model_dump(mode="json"),
        "test_metric": {
            "name": task.metric.name,
            "value": value,
            "loss": float(epsilon),
            "split": "evaluation",
            "samples": int(samples),
        },
    }
