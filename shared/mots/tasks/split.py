"""Participants' data folders cut from a public set, for demos and tests (``mots data split``).

Client j of type i gets the samples the training code's partition gives it
(:func:`mots.training.partition.shard_indices`: i.i.d. or label skew, D_i each, seeded), in the
same order, so a participant training on its folder trains exactly on what the former
``client-index`` slice of the public set held. Real participants bring folders of their own.
"""

from __future__ import annotations

from pathlib import Path

from mots.tasks.local_data import write_folder
from mots.tasks.public import load_public
from mots.tasks.task_file import MarketTask
from mots.training.config import PartitionName, TrainConfig
from mots.training.partition import shard_indices


def folder_name(type_index: int, client_index: int) -> str:
    """The folder of client j of type i (0-based both): ``type-<i+1>-<j>``."""
    return f"type-{type_index + 1}-{client_index:03d}"


def split_public(
    task: MarketTask,
    out: str | Path,
    *,
    sizes: tuple[int, ...] | None = None,
    counts: tuple[int, ...] | None = None,
    partition: PartitionName = "iid",
    seed: int = 0,
) -> dict[tuple[int, int], Path]:
    """Write one folder per participant under ``out`` from the task's public set (``data.public``);
    D_i and N_i default to the task's client types. Returns (type, client) → folder."""
    if task.data.public is None:
        raise ValueError(f"task {task.name}: data.public names no public set to split")
    types = task.economics.scenario.types
    sizes = sizes or tuple(int(t.data_size) for t in types)
    counts = counts or tuple(int(t.count) for t in types)
    config = TrainConfig(sizes=sizes, counts=counts, partition=partition, seed=seed)
    public = load_public(task.data.public)
    clients = [(i, j) for i, n in enumerate(config.type_counts) for j in range(int(n))]
    indices = shard_indices(public.y_train, config, clients)
    folders: dict[tuple[int, int], Path] = {}
    for (i, j), idx in zip(clients, indices, strict=True):
        folder = Path(out) / folder_name(i, j)
        folders[(i, j)] = write_folder(task.data, folder, public.x_train[idx], public.y_train[idx])
    return folders
