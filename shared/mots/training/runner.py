"""``train_coalition``: train the market's social state K (participants per type) and report ε.

Two engines run the same arithmetic: ``inprocess`` (this process, fast, for sweeps and tests) and
``deployment`` (Flower's deployment engine: a SuperLink and one SuperNode per edge device). The
global model of every round is saved as an artifact when ``artifact_dir`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mots.training.config import TrainConfig
from mots.training.progress import ProgressPrinter, RoundProgress

if TYPE_CHECKING:
    from mots.tasks.task_file import MarketTask
    from mots.training.artifacts import TrainingResult
    from mots.training.external_superlink import Federation
    from mots.training.inprocess import Removed


def train_coalition(
    participants: Sequence[int],
    config: TrainConfig,
    *,
    engine: Literal["inprocess", "deployment"] = "inprocess",
    federation: Federation | None = None,
    progress: bool | Callable[[RoundProgress], None] = False,
    artifact_dir: Path | None = None,
    quoted_epsilon: float | None = None,
    removed: Removed | None = None,
    task: MarketTask | None = None,
) -> TrainingResult:
    """Train coalition K = ``participants`` (K_i per type) with FedAvg; ε is the final test loss.

    ``engine="deployment"`` runs on Flower's deployment engine: on ``federation`` if given (a
    local one or an external SuperLink; its nodes must include the coalition's types), else on a
    temporary local federation holding exactly the coalition's clients, stopped afterwards. There
    every update is verified, and the model is refused (``QualityGateError``) when it is far
    worse than ``quoted_epsilon`` (the ε the market priced) or than the untrained model.
    ``removed`` is asked which participants were removed (revoked or departed): in process
    before each round, they are left out of that round and the later ones; on the deployment
    engine while the run trains, their SuperNode keys are unregistered at the SuperLink and the
    ServerApp asks them no more and ignores a reply in flight (:mod:`mots.training.removal`).
    Either way they are not averaged from then on and are reported dropped. ``task`` (issue 36,
    deployment engine only) trains that task's model on each node's ``data-<task>`` folder
    (:mod:`mots.training.task_run`).
    """
    k = config.check_participants(list(participants))
    report: Callable[[RoundProgress], None] | None
    if callable(progress):
        report = progress
    else:
        report = ProgressPrinter(f"K={list(k)}") if progress else None
    if engine == "inprocess":
        if task is not None:
            raise ValueError(
                "task: the in-process engine trains the training config's data set only; "
                "train a task with engine='deployment'"
            )
        from mots.training.inprocess import train_inprocess

        return train_inprocess(
            k, config, report, Path(artifact_dir) if artifact_dir is not None else None, removed
        )
    if engine == "deployment":
        from mots.training.deployment import train_on_federation

        return train_on_federation(
            k,
            config,
            federation=federation,
            report=report,
            artifact_dir=artifact_dir,
            quoted_epsilon=quoted_epsilon,
            removed=removed,
            task=task,
        )
    raise ValueError(f"engine must be 'inprocess' or 'deployment', got {engine!r}")
