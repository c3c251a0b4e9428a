"""The ClientApp each edge node runs (Flower Message API): train locally.

The ServerApp knows which participant a node is from the key the node authenticates with, so
nothing here reports an identity; each train message names the node's type and index in the
run's task (from the ServerApp's node map: a device of two tasks has a type per task), which sets
the attested D its own data is checked against; on the public-set layout the node config's
``type-index``/``client-index`` say which data partition this device holds. ``train`` runs E SGD steps from the received global model
on this device's own data when its node config names a folder for the run's task
(``data-<task>``, the SuperNode's ``--data TASK=PATH``; issue 36): checked against the task's data
(shape, dtype, labels) and the type's attested D first, the round refused with the reason in the
SuperNode's log when it does not fit, never trained on anything else; the model trained is the
run's task's architecture when the run config carries one (``task-network``,
:mod:`mots.training.task_run`), else the training config's. A node with no such folder
trains on its ``client-index`` slice of the public set (read from the node config's ``data-dir``
when it names one, else the run's): through the
node's resident trainer when its node config names a ``trainer-socket`` (torch stays loaded), else
in this process. With the run's ``noop`` set it returns the weights untouched (Flower's floor).
This module imports no torch, so a round pays no torch start-up when a trainer is resident.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

import mots.training.flower_messages as fm
from mots.training.config import TrainConfig
from mots.training.task_data import node_task_data
from mots.training.task_run import network_of_run


def _num(value: Any) -> float:
    """A scalar record value as a number (records are typed as unions of scalars and lists)."""
    if isinstance(value, list | bytes | str):
        raise TypeError(f"expected a number in the record, got {value!r}")
    return float(value)


app = ClientApp()
log = logging.getLogger("mots.edge.client_app")


def local_data_request(
    run_config: Any, node_config: Any, cfg: TrainConfig, type_index: int
) -> dict[str, Any] | None:
    """The request's ``local_data`` when this device holds its own data for the run's task; None
    for a node of the public-set layout (no ``data-<task>`` at all) in a run of the training
    config's data set. A device that holds data for other tasks only, or none in a run of a
    task's own architecture (issue 36), refuses the round."""
    task = fm.task_from_run(run_config, cfg)
    folders = node_task_data(node_config)
    if not folders and network_of_run(run_config) is None:
        return None
    if task not in folders:
        message = (
            f"this device holds no data for task {task} (its --data names "
            f"{', '.join(sorted(folders)) or 'no task'}); it does not train in this round"
        )
        log.error(message)
        raise ValueError(message)
    return {
        "task": task,
        "path": folders[task],
        "spec": fm.task_data_spec(run_config, task),
        "min_samples": int(cfg.sizes[type_index]),
        "network": network_of_run(run_config),  # the task's architecture (None: cfg.model)
    }


def _update(sock: str, request: dict[str, Any], weights: list[Any]) -> tuple[list[Any], Any]:
    """The local update, by the node's resident trainer when it has one, else in this process."""
    if sock:
        from mots.training.edge_trainer import request_training

        return request_training(sock, request, weights)
    from mots.training.edge_trainer import handle_train

    return handle_train(request, weights)


@app.train()
def train(msg: Message, context: Context) -> Message:
    """One local update of the global model in ``msg`` (round index in its ``config`` record)."""
    start = time.perf_counter()
    weights = msg.content.array_records["arrays"].to_numpy_ndarrays()
    round_index = int(_num(msg.content.config_records["config"]["round"]))
    if bool(context.run_config.get(fm.RUN_NOOP, False)):
        metrics = {"train_seconds": 0.0, "train_loss": 0.0, "num_examples": 0, "samples": 0}
        new = weights
    else:
        cfg = fm.train_config_from_run(context.run_config)
        if context.node_config.get(fm.NODE_DATA_DIR):  # the device's own data directory wins
            cfg = cfg.model_copy(update={"data_dir": str(context.node_config[fm.NODE_DATA_DIR])})
        # who the node is in this run's task (its type sets the attested D its own data must
        # hold); a node of the public-set layout trains the partition its node config names
        in_run = fm.run_identity(msg.content.config_records["config"], context.node_config)
        local = local_data_request(context.run_config, context.node_config, cfg, in_run[0])
        i, j = in_run if local is not None else fm.node_identity(context.node_config)
        request = {
            "config": cfg.model_dump(mode="json"),
            "type_index": i,
            "client_index": j,
            "round": round_index,
            "local_data": local,
        }
        sock = str(context.node_config.get(fm.NODE_TRAINER_SOCKET, ""))
        try:
            new, metrics = _update(sock, request, weights)
        except Exception as err:
            log.error("round %d refused: %s", round_index, err)  # what the operator sees
            raise
    reply = MetricRecord(
        {
            "train_seconds": float(metrics["train_seconds"]),
            "train_loss": float(metrics["train_loss"]),
            "num_examples": int(metrics["num_examples"]),
            "samples": int(metrics["samples"]),
            "client_seconds": time.perf_counter() - start,
            "pid": os.getpid(),
        }
    )
    return Message(RecordDict({"arrays": ArrayRecord(new), "metrics": reply}), reply_to=msg)
