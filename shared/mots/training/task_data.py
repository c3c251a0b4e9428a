"""A device's own data folder per task: ``--data TASK=PATH`` on the SuperNode's command line, carried
to the ClientApp as node config ``data-<task>="PATH"`` (issue 36). Imports neither torch nor flwr."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mots.training.flower_messages import NODE_DATA_DIR, NODE_TASK_DATA_PREFIX


def task_data_pairs(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``TASK=PATH`` items (``--data``) as task → path; a malformed item names the rule."""
    out: dict[str, str] = {}
    for item in items:
        task, sep, path = item.partition("=")
        if not sep or not task or not path:
            raise ValueError(f"--data: {item!r} is not TASK=PATH (e.g. fashion-mnist=/data/fm)")
        if task == "dir" or not task.replace("-", "").isalnum() or task != task.lower():
            raise ValueError(
                f"--data: {task!r} is not a task name (lower-case letters, digits, '-')"
            )
        out[task] = path
    return out


def task_data_node_config(paths: Mapping[str, str]) -> str:
    """The node-config pairs that carry ``--data``: ``data-<task>="PATH"`` each."""
    quoted = {t: p.replace("\\", "\\\\").replace('"', '\\"') for t, p in paths.items()}
    return " ".join(f'{NODE_TASK_DATA_PREFIX}{t}="{p}"' for t, p in quoted.items())


def node_task_data(node_config: Mapping[str, Any]) -> dict[str, str]:
    """Task → data folder, from the node config's ``data-<task>`` keys."""
    return {
        str(k)[len(NODE_TASK_DATA_PREFIX) :]: str(v)
        for k, v in node_config.items()
        if str(k).startswith(NODE_TASK_DATA_PREFIX) and k != NODE_DATA_DIR
    }


def pop_option(argv: list[str], name: str) -> str | None:
    """Remove the first ``name VALUE`` (or ``name=VALUE``) from argv; its value, else None."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith(name + "="):
            del argv[i]
            return arg.split("=", 1)[1]
    return None


def with_task_data(argv: list[str]) -> list[str]:
    """Move every ``--data TASK=PATH`` (repeatable; the device's own data folder per task) into
    the ``--node-config`` as ``data-<task>="PATH"``, where the ClientApp reads it; a folder that
    does not exist refuses the start."""
    args = list(argv)
    items = []
    while (item := pop_option(args, "--data")) is not None:
        items.append(item)
    if not items:
        return args
    paths = task_data_pairs(items)
    missing = [f"{t}={p}" for t, p in paths.items() if not Path(p).is_dir()]
    if missing:
        raise ValueError(f"--data: no such folder: {', '.join(missing)}")
    pairs = task_data_node_config(paths)
    config = pop_option(args, "--node-config")
    return [*args, "--node-config", f"{config} {pairs}" if config else pairs]


def node_folders(roots: Mapping[str, str], type_index: int, client_index: int) -> str:
    """The ``data-<task>`` pairs of client (i, j) whose folders ``mots data split`` wrote under
    each task's root (``ROOT/type-<i+1>-<j>``, :func:`mots.tasks.split.folder_name`)."""
    from mots.tasks.split import folder_name

    name = folder_name(type_index, client_index)
    return task_data_node_config({t: str(Path(root) / name) for t, root in roots.items()})
