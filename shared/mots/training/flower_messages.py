"""What the ServerApp and ClientApp exchange: run config keys, node identity, reply metrics.

Kept apart from the apps so both sides (and the launcher that writes the run config) agree on
one spelling. Imports neither torch nor flwr.

The node map (``node-map``) is the only source of who is who for the ServerApp: Flower's node id
of each registered SuperNode key → (type index, client index) of the participant that key
belongs to. Each train message tells the node who it is in the run's task (``type-index``,
``client-index`` from that map: :func:`run_identity`); the node config's identity, one for all a
device's tasks, is only the fallback that names a data partition; the ServerApp never reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mots.training.config import TrainConfig
from mots.training.verification import VerificationPolicy

RUN_TRAIN_CONFIG = "train-config"
RUN_PARTICIPANTS = "participants"
RUN_OUT_DIR = "out-dir"
RUN_ARTIFACT_DIR = "artifact-dir"
RUN_NOOP = "noop"
RUN_NODE_TIMEOUT = "node-timeout"
RUN_ROUND_TIMEOUT = "round-timeout"
RUN_NODE_MAP = "node-map"
RUN_POLICY = "policy"
RUN_QUOTED_EPSILON = "quoted-epsilon"
RUN_TASK = "task"
RUN_TASK_DATA = "task-data"

NODE_TYPE_INDEX = "type-index"
MSG_TYPE_INDEX = "type-index"
"""In a train message's config: the participant's type in the run's task, from the ServerApp's
node map (a device of several tasks has one node config, but a type and index per task)."""
MSG_CLIENT_INDEX = "client-index"
"""In a train message's config: the participant's index within its type in the run's task."""
NODE_CLIENT_INDEX = "client-index"
NODE_CLIENT_TYPE = "client-type"
NODE_TRAINER_SOCKET = "trainer-socket"
NODE_DATA_DIR = "data-dir"
NODE_TASK_DATA_PREFIX = "data-"
"""``data-<task>="PATH"``: the folder of this device's own data for that task (``--data TASK=PATH``
of the edge agent and the SuperNode); ``data-dir`` (a public set's files) is not one of them."""


def run_config(
    config: TrainConfig,
    participants: list[int] | tuple[int, ...],
    out_dir: str,
    *,
    artifact_dir: str = "",
    noop: bool = False,
    node_timeout: float = 180.0,
    node_map: Mapping[int, tuple[int, int]] | None = None,
    policy: VerificationPolicy | None = None,
    quoted_epsilon: float | None = None,
    task_data: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The run-config overrides that make the ServerApp train ``participants`` under ``config``,
    telling nodes apart by ``node_map`` and verifying by ``policy``; ``task_data`` (a task's
    ``data`` section as JSON) is what a node's own folder is checked against (issue 36)."""
    pol = policy or VerificationPolicy()
    extra = {RUN_TASK_DATA: json.dumps(dict(task_data), sort_keys=True)} if task_data else {}
    return {
        **extra,
        RUN_TRAIN_CONFIG: json.dumps(config.model_dump(mode="json"), sort_keys=True),
        RUN_PARTICIPANTS: ",".join(str(int(k)) for k in participants),
        RUN_OUT_DIR: out_dir,
        RUN_ARTIFACT_DIR: artifact_dir,
        RUN_NOOP: bool(noop),
        RUN_NODE_TIMEOUT: float(node_timeout),
        RUN_ROUND_TIMEOUT: float(pol.round_timeout_s),
        RUN_NODE_MAP: node_map_json(node_map or {}),
        RUN_POLICY: pol.model_dump_json(),
        RUN_QUOTED_EPSILON: float(quoted_epsilon) if quoted_epsilon else 0.0,
    }


def node_map_json(node_map: Mapping[int, tuple[int, int]]) -> str:
    """The node map as the run config carries it: {"<node id>": [type index, client index]}."""
    return json.dumps({str(int(n)): [int(i), int(j)] for n, (i, j) in node_map.items()})


def node_map_from_run(run_config: Mapping[str, Any]) -> dict[int, tuple[int, int]]:
    """Flower node id → (type index, client index) from the run's ``node-map``."""
    raw = str(run_config.get(RUN_NODE_MAP, "") or "{}")
    try:
        data = json.loads(raw)
        out = {int(n): (int(v[0]), int(v[1])) for n, v in data.items()}
    except (ValueError, TypeError, IndexError, AttributeError) as err:
        raise ValueError(
            f'run config {RUN_NODE_MAP} must map node ids to [type, index], e.g. {{"17": [0, 2]}}: {err}'
        ) from err
    if not out:
        raise ValueError(
            f"run config {RUN_NODE_MAP} is empty: the launcher maps each registered node's id to "
            "its participant"
        )
    return out


def policy_from_run(run_config: Mapping[str, Any]) -> VerificationPolicy:
    """The run's verification and drop-out policy (its ``policy`` JSON; defaults when empty),
    with ``round-timeout`` as the round deadline when the policy does not set one."""
    raw = str(run_config.get(RUN_POLICY, "") or "{}")
    data = json.loads(raw)
    if RUN_ROUND_TIMEOUT in run_config and "round_timeout_s" not in data:
        data["round_timeout_s"] = float(run_config[RUN_ROUND_TIMEOUT])
    return VerificationPolicy(**data)


def to_toml(values: Mapping[str, Any]) -> str:
    """A flat TOML table (strings, bools, numbers) for ``flwr run --run-config FILE``."""
    lines = []
    for k, v in values.items():
        if isinstance(v, bool):
            lines.append(f"{k} = {'true' if v else 'false'}")
        elif isinstance(v, int | float):
            lines.append(f"{k} = {v!r}")
        else:
            lines.append(f"{k} = {json.dumps(str(v))}")
    return "\n".join(lines) + "\n"


def train_config_from_run(run_config: Mapping[str, Any]) -> TrainConfig:
    """The TrainConfig a run carries (its ``train-config`` JSON string)."""
    raw = str(run_config.get(RUN_TRAIN_CONFIG, "") or "{}")
    return TrainConfig(**json.loads(raw))


def participants_from_run(run_config: Mapping[str, Any]) -> list[int]:
    """K per type from the run's ``participants`` ("2,0,5")."""
    raw = str(run_config.get(RUN_PARTICIPANTS, "")).strip()
    if not raw:
        raise ValueError("run config participants is empty: give K_i per type, e.g. '2,0,5'")
    try:
        return [int(x) for x in raw.split(",")]
    except ValueError as err:
        raise ValueError(
            f"run config participants must be integers like '2,0,5', got {raw!r}"
        ) from err


def node_identity(node_config: Mapping[str, Any]) -> tuple[int, int]:
    """(type index i, client index j) of a SuperNode from its node config.

    ``type-index`` is 0-based; without it, ``client-type`` may be an integer or 'type-<n>' (1-based).
    """
    if NODE_TYPE_INDEX in node_config:
        i = int(node_config[NODE_TYPE_INDEX])
    else:
        raw = str(node_config.get(NODE_CLIENT_TYPE, ""))
        digits = raw.rsplit("-", 1)[-1]
        if not digits.isdigit():
            raise ValueError(
                f"node config: needs {NODE_TYPE_INDEX} (0-based) or {NODE_CLIENT_TYPE} like 'type-1', got {raw!r}"
            )
        i = int(digits) - (0 if raw.isdigit() else 1)
    if NODE_CLIENT_INDEX not in node_config:
        raise ValueError(
            f"node config: needs {NODE_CLIENT_INDEX}, the node's index within its type"
        )
    return i, int(node_config[NODE_CLIENT_INDEX])


def run_identity(
    message_config: Mapping[str, Any], node_config: Mapping[str, Any]
) -> tuple[int, int]:
    """(type index i, client index j) of this node in the message's run: what the ServerApp's
    node map says (``type-index``/``client-index`` in the train message's config), else the node
    config's (:func:`node_identity`). The run's sets the attested D a device's own data must
    hold: a device in two tasks' coalitions is one SuperNode whose type may differ by task
    (issue 36). A node of the public-set layout still trains the partition its node config
    names (a node claiming another's there trains the other's slice and fails verification)."""
    if MSG_TYPE_INDEX in message_config and MSG_CLIENT_INDEX in message_config:
        return int(message_config[MSG_TYPE_INDEX]), int(message_config[MSG_CLIENT_INDEX])
    return node_identity(node_config)


def task_from_run(run_config: Mapping[str, Any], config: TrainConfig) -> str:
    """The task a run trains: its ``task``, else the TrainConfig's data set (``fashion-mnist``)."""
    return str(run_config.get(RUN_TASK, "") or config.dataset)


def task_data_spec(run_config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """What the task's data looks like (a :class:`mots.tasks.task_file.DataSpec` as JSON): the
    run's ``task-data``, else the data section of the task file of that name, else (an edge image
    ships no task files) the IDX image set of that name as ``mots data split`` writes it."""
    raw = str(run_config.get(RUN_TASK_DATA, "") or "")
    if raw:
        spec: dict[str, Any] = json.loads(raw)
        return spec
    from mots.tasks.task_file import TaskFileError, load_task
    from mots.training.datasets import CLASS_NAMES

    try:
        return load_task(task).data.model_dump(mode="json")
    except TaskFileError:  # a device without the task files: the platform's own image sets
        if task not in CLASS_NAMES:
            raise
    shape = [1, 28, 28] if task in ("fashion-mnist", "mnist") else [3, 32, 32]
    return {"format": "npz", "input_shape": shape, "dtype": "uint8", "labels": CLASS_NAMES[task],
            "scale": 255.0}  # fmt: skip
