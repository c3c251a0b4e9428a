"""What training produces: :class:`TrainingResult`, the per-round artifacts and their metadata.

A leaf of the training package (it imports only the config, and the artifact format when it
writes): both engines, the in-process runner and the deployment launcher with the Flower ServerApp,
build their results and artifacts from here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mots.training.config import TrainConfig

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
    """What an artifact records: data set, coalition, round (1-based), ε and the full config,
    and what a buyer with PyTorch alone needs (issue 26): the network as plain data, the
    preprocessing, the input shape and the class names."""
    from mots.training.datasets import CLASS_NAMES, PREPROCESSING
    from mots.training.models import describe_network

    shape = (int(input_shape[0]), int(input_shape[1]), int(input_shape[2]))
    return {
        "network": describe_network(config.model, shape, 10),
        "preprocessing": dict(PREPROCESSING),
        "class_names": list(CLASS_NAMES[config.dataset]),
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
        from mots.training.artifacts import measure_test_metric, save_artifact

        path = self.directory / f"round-{int(metadata['round']):04d}.pt"
        metadata = {**metadata, "test_metric": measure_test_metric(metadata, names, weights)}
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
