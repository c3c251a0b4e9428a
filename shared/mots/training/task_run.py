"""A task's round on the Flower federation (issue 36): what the run config carries of the task,
and the task's global model, evaluation data and holdout on the ServerApp's side.

The launcher (:func:`mots.training.deployment.run_app`) puts the task into the run config
(:func:`task_run_config`): its name (``task``, which data folder a node trains on), its data
section (``task-data``, what a node's folder is checked against), its network as plain data
(``task-network``, what the ClientApp trains: the task file's ``model:`` built by
:mod:`mots.tasks.architectures`) and the whole task (``task-spec``, what the ServerApp evaluates
and publishes by). The ServerApp then builds, instead of the Fashion-MNIST model
(:func:`mots.training.strategy.build`), the task's model (:func:`build_task_model`): the
network from the task's architecture, ε measured on the task's evaluation data (the platform's
own, as :func:`mots.tasks.training.evaluate_model_file` measures a model file), and the
verification holdout a seeded sample of that evaluation data (the platform holds no other data
of a task; the holdout only judges updates, the model never trains on it). Each round's model is
saved as the task's ``mots-model/2`` file (:func:`mots.tasks.training.task_round_metadata`: the same metadata
:func:`mots.tasks.training.train_task` writes), which ``examples/buyer/classify.py`` scores with
PyTorch alone. FedAvg's E, b, η0 and aggregation are the task's ``rounds:``
(:func:`task_train_config`), as Section 5 runs FedAvg (η_r = η0/(1+r), Eq. 2/Eq. 3 averaging).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import mots.training.flower_messages as fm
from mots.training.config import TrainConfig

if TYPE_CHECKING:
    from mots.tasks.task_file import MarketTask
    from mots.training.participants import RunSetup
    from mots.training.strategy import Model

RUN_TASK_SPEC = "task-spec"
"""The whole task (its file as JSON, the evaluation folder made absolute): the ServerApp's."""
RUN_TASK_NETWORK = "task-network"
"""The task's network as plain data: what the ClientApp builds and trains."""
HOLDOUT_SHARE = 0.5
"""At most this share of the evaluation data is sampled for the holdout (it is also all ε is
measured on, so the holdout never takes it all)."""


def task_spec_json(task: MarketTask, base: Path | None = None) -> str:
    """The task as the run config carries it: its JSON, a relative evaluation folder resolved
    against ``base`` (else the working directory), so the ServerApp finds it from anywhere."""
    data = task.model_dump(mode="json")
    path = data["evaluation"].get("path")
    if path and not Path(path).is_absolute():
        data["evaluation"]["path"] = str(((base or Path.cwd()) / path).resolve())
    return json.dumps(data, sort_keys=True)


def task_run_config(task: MarketTask, base: Path | None = None) -> dict[str, Any]:
    """The run-config entries that make a Flower run train ``task`` (module docstring)."""
    return {
        fm.RUN_TASK: task.name,
        fm.RUN_TASK_DATA: json.dumps(task.data.model_dump(mode="json"), sort_keys=True),
        RUN_TASK_NETWORK: json.dumps(task.network(), sort_keys=True),
        RUN_TASK_SPEC: task_spec_json(task, base),
    }


def task_of_run(run_config: Mapping[str, Any]) -> MarketTask | None:
    """The task a run trains when its config carries one (``task-spec``), else None (the
    Fashion-MNIST run of the training config); a spec that does not validate names its fields."""
    raw = str(run_config.get(RUN_TASK_SPEC, "") or "")
    if not raw:
        return None
    from mots.tasks.task_file import parse_task

    return parse_task(json.loads(raw), f"run config {RUN_TASK_SPEC}")


def network_of_run(run_config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The network the ClientApp trains (``task-network``), or None (the training config's)."""
    raw = str(run_config.get(RUN_TASK_NETWORK, "") or "")
    return dict(json.loads(raw)) if raw else None


def task_train_config(
    task: MarketTask, sizes: Sequence[float], counts: Sequence[int], **overrides: Any
) -> TrainConfig:
    """The FedAvg settings of a round of ``task`` (its ``rounds:``: R, E, b, η0, aggregation) for
    a population of D_i = ``sizes`` and N_i = ``counts`` per type; ``zero_init`` as the task's
    ``model.init`` (w0 = 0 as in Section 5, or seeded random)."""
    spec = task.rounds
    values: dict[str, Any] = {
        "sizes": tuple(int(d) for d in sizes),
        "counts": tuple(max(1, int(c)) for c in counts),
        "rounds": spec.fedavg_rounds,
        "local_steps": spec.local_steps,
        "batch_size": spec.batch_size,
        "lr": spec.lr,
        "aggregation": spec.aggregation,
        "zero_init": task.model.init == "zero",
    }
    values.update(overrides)
    return TrainConfig(**values)


def holdout_sample(n_eval: int, n: int, seed: int) -> np.ndarray:
    """A seeded sample of at most ``n`` (and at most :data:`HOLDOUT_SHARE` of the) evaluation
    indices: the holdout of a task (module docstring)."""
    k = min(int(n), int(n_eval * HOLDOUT_SHARE))
    rng = np.random.default_rng([seed, 0x7A5C])
    return np.sort(rng.permutation(n_eval)[: max(0, k)]).astype(np.int64)


def build_task_model(setup: RunSetup, task: MarketTask) -> Model:
    """The initial global model of ``task`` (its architecture; w0 = 0 or seeded random as its
    ``model.init``), the evaluation data ε is measured on and the holdout that verification
    judges updates with (module docstring)."""
    import torch

    from mots.client.model_file import build_network
    from mots.tasks.training import evaluation_data
    from mots.training.holdout import Holdout
    from mots.training.local import evaluate, torch_threads
    from mots.training.models import get_weights, weight_names
    from mots.training.strategy import Model

    cfg = setup.cfg
    x, y = evaluation_data(task)
    network = task.network()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        net = build_network(network)
    if cfg.zero_init:
        with torch.no_grad():
            for p in net.parameters():
                p.zero_()
    x_test, y_test = torch.from_numpy(x), torch.from_numpy(y)
    with torch_threads(1):
        initial = float("nan") if setup.noop else evaluate(net, x_test, y_test)[0]
    holdout = None
    if setup.policy.verify and not setup.noop:
        idx = holdout_sample(len(y), setup.policy.holdout, cfg.seed)
        holdout = Holdout.from_samples(cfg, x[idx], y[idx], build_network(network))
    shape = tuple(int(s) for s in task.data.input_shape)
    model = Model(net, weight_names(net), get_weights(net), x_test, y_test, holdout, initial, shape)
    model.task = task
    return model
