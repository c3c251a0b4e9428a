"""``train_coalition``: train the market's social state K (participants per type) and report ε.

Two engines run the same arithmetic: ``inprocess`` (this process, fast, for sweeps and tests) and
``deployment`` (Flower's deployment engine: a SuperLink and one SuperNode per edge device). The
global model of every round is saved as an artifact when ``artifact_dir`` is given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from mots.training.config import TrainConfig
from mots.training.progress import ProgressPrinter, RoundProgress

if TYPE_CHECKING:
    from mots.training.federation import Federation

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TrainingResult:
    """The outcome of training one coalition: ε (final global test loss) and the per-round record."""

    epsilon: float
    losses: list[float]
    round_seconds: list[float]
    artifact_path: Path | None
    artifact_sha256: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    accuracy: float | None = None


def round_metadata(
    config: TrainConfig,
    participants: Sequence[int],
    round_index: int,
    epsilon: float,
    accuracy: float | None,
    input_shape: Sequence[int],
    engine: str,
) -> dict[str, Any]:
    """What an artifact records: data set, coalition, round (1-based), ε and the full config."""
    return {
        "dataset": config.dataset,
        "data_dir": None if config.data_dir is None else str(config.data_dir),
        "model": config.model,
        "input_shape": [int(x) for x in input_shape],
        "num_classes": 10,
        "participants": [int(k) for k in participants],
        "round": round_index + 1,
        "rounds": config.rounds,
        "epsilon": float(epsilon),
        "accuracy": None if accuracy is None else float(accuracy),
        "aggregation": config.aggregation,
        "seed": config.seed,
        "engine": engine,
        "config": config.model_dump(mode="json"),
    }


class ArtifactWriter:
    """Saves each round's global model under ``directory`` and keeps ``manifest.json`` current."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.entries: list[dict[str, Any]] = []

    def write(
        self, names: list[str], weights: list[FloatArray], metadata: dict[str, Any]
    ) -> tuple[Path, str]:
        """Save one round's artifact; return (path, sha256)."""
        from mots.training.artifacts import save_artifact

        path = self.directory / f"round-{int(metadata['round']):04d}.pt"
        digest = save_artifact(path, names, weights, metadata)
        self.entries.append(
            {
                "round": metadata["round"],
                "epsilon": metadata["epsilon"],
                "file": path.name,
                "sha256": digest,
            }
        )
        (self.directory / "manifest.json").write_text(
            json.dumps({"artifacts": self.entries}, indent=1)
        )
        return path, digest


def _inprocess(
    participants: tuple[int, ...],
    config: TrainConfig,
    report: Callable[[RoundProgress], None] | None,
    artifact_dir: Path | None,
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
    outcomes = run_inprocess(participants, config, on_round=on_round, dataset=ds)
    path, digest = last[0] if last else (None, None)
    return TrainingResult(
        epsilon=outcomes[-1].epsilon,
        losses=[o.epsilon for o in outcomes],
        round_seconds=[o.seconds for o in outcomes],
        artifact_path=path,
        artifact_sha256=digest,
        metadata={
            "engine": "inprocess",
            "participants": list(participants),
            "completed_participants": list(participants),
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
) -> TrainingResult:
    """Train coalition K = ``participants`` (K_i per type) with FedAvg; ε is the final test loss.

    ``engine="deployment"`` runs on Flower's deployment engine: on ``federation`` if given (a
    local one or an external SuperLink; its nodes must include the coalition's types), else on a
    temporary local federation holding exactly the coalition's clients, stopped afterwards.
    """
    k = config.check_participants(list(participants))
    report: Callable[[RoundProgress], None] | None
    if callable(progress):
        report = progress
    else:
        report = ProgressPrinter(f"K={list(k)}") if progress else None
    if engine == "inprocess":
        return _inprocess(
            k, config, report, Path(artifact_dir) if artifact_dir is not None else None
        )
    if engine == "deployment":
        from mots.training.deployment import train_on_federation

        result: TrainingResult = train_on_federation(
            k, config, federation=federation, report=report, artifact_dir=artifact_dir
        )
        return result
    raise ValueError(f"engine must be 'inprocess' or 'deployment', got {engine!r}")
