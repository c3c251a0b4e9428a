"""``train_coalition``: train the market's social state K (participants per type) and report ε.

Two engines run the same arithmetic: ``inprocess`` (this process, fast, for sweeps and tests) and
``deployment`` (Flower's deployment engine: a SuperLink and one SuperNode per edge device). The
global model of every round is saved as an artifact when ``artifact_dir`` is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mots.training.artifacts import ArtifactWriter, TrainingResult, round_metadata
from mots.training.config import TrainConfig
from mots.training.progress import ProgressPrinter, RoundProgress

if TYPE_CHECKING:
    from mots.training.external_superlink import Federation

Removed = Callable[[], Collection[tuple[int, int]]]
"""The participants (type i, index j) removed from the round so far (revoked or departed)."""


class _Removals:
    """Asks ``removed`` before each in-process round, maps (i, j) to the coalition's order and
    remembers the round each one left in (issue 24: their updates are not averaged)."""

    def __init__(self, participants: tuple[int, ...], config: TrainConfig, removed: Removed):
        from mots.training.partition import coalition_ids

        self.ids = coalition_ids(participants, config.type_counts)
        self.removed = removed
        self.left: dict[tuple[int, int], int] = {}

    def __call__(self, r: int) -> list[int]:
        for ij in self.removed():
            self.left.setdefault(ij, r)
        return [k for k, ij in enumerate(self.ids) if ij in self.left]

    def status(self) -> list[dict[str, object]]:
        """Each participant's record: verified, or dropped in the round it was removed in."""
        return [
            {"type_index": i, "client_index": j, "status": "verified", "reason": ""}
            if (i, j) not in self.left
            else {
                "type_index": i,
                "client_index": j,
                "status": "dropped",
                "left_in_round": self.left[(i, j)],
                "reason": "removed (revoked or departed) while training",
            }
            for i, j in self.ids
        ]


def _inprocess(
    participants: tuple[int, ...],
    config: TrainConfig,
    report: Callable[[RoundProgress], None] | None,
    artifact_dir: Path | None,
    removed: Removed | None = None,
) -> TrainingResult:
    from mots.training.datasets import load_dataset
    from mots.training.inprocess import RoundOutcome, run_inprocess

    ds = load_dataset(config.dataset, config.data_dir)
    writer = ArtifactWriter(artifact_dir) if artifact_dir is not None else None
    last: list[tuple[Path, str]] = []

    def on_round(o: RoundOutcome) -> None:
        if writer is not None:
            meta = round_metadata(
                config, participants, o.round, o.epsilon, o.accuracy, ds.input_shape, "inprocess"
            )
            last[:] = [writer.write(o.names, o.weights, meta)]
        if report is not None:
            report(
                RoundProgress(
                    o.round, config.rounds, o.clients_done, sum(participants), o.epsilon, o.seconds
                )
            )

    start = time.perf_counter()
    gone = _Removals(participants, config, removed) if removed is not None else None
    outcomes = run_inprocess(participants, config, on_round=on_round, dataset=ds, removed=gone)
    path, digest = last[0] if last else (None, None)
    completed = list(participants)
    for i, _ in gone.left if gone is not None else ():
        completed[i] -= 1
    return TrainingResult(
        epsilon=outcomes[-1].epsilon,
        losses=[o.epsilon for o in outcomes],
        round_seconds=[o.seconds for o in outcomes],
        artifact_path=path,
        artifact_sha256=digest,
        metadata={
            "engine": "inprocess",
            "participants": list(participants),
            "completed_participants": completed,
            **({"participant_status": gone.status()} if gone is not None and gone.left else {}),
            "accuracy": outcomes[-1].accuracy,
            "seconds": time.perf_counter() - start,
            "config": config.model_dump(mode="json"),
        },
        accuracy=outcomes[-1].accuracy,
    )


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
    Either way they are not averaged from then on and are reported dropped.
    """
    k = config.check_participants(list(participants))
    report: Callable[[RoundProgress], None] | None
    if callable(progress):
        report = progress
    else:
        report = ProgressPrinter(f"K={list(k)}") if progress else None
    if engine == "inprocess":
        return _inprocess(
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
        )
    raise ValueError(f"engine must be 'inprocess' or 'deployment', got {engine!r}")
