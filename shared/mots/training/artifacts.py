"""Model artifacts: the global model of a round, with metadata, that the market sells and serves,
and what training produces around them (:class:`TrainingResult`).

``<stem>.pt2`` holds the network, its weights and metadata (a ``torch.export`` archive that PyTorch
alone loads in one call, format ``mots-model/2``, docs/training.md); ``<stem>.json`` beside it repeats the metadata and adds the file's SHA-256,
so a buyer can :func:`verify` what they downloaded against the digest the market published. Both
engines, the in-process runner and the deployment launcher with the Flower ServerApp, write a
round's artifact with :class:`ArtifactWriter` (its metadata from :func:`round_metadata`) and
report a :class:`TrainingResult`. The file's format, digest and sidecar are the SDK's
(:mod:`mots.client.model_file`, which reads them back). A light module: torch and the data sets
are imported only when a file is written, read or measured.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict

from mots.client.model_file import (
    EXPORT_LOCK,
    FORMAT,
    METADATA_MEMBER,
    sha256_file,
    write_sidecar,
)
from mots.platform.api.rounds import TrainingCurve

if TYPE_CHECKING:
    from mots.training.config import TrainConfig

FloatArray = npt.NDArray[np.float32]


class ArtifactError(ValueError):
    """An artifact is malformed or does not match its digest."""


class TrainingResult(TrainingCurve):
    """The outcome of training one coalition on an engine: the curve, the model file it wrote
    (None when none was published) and the final test accuracy."""

    model_config = ConfigDict(frozen=True)

    artifact_path: Path | None
    artifact_sha256: str | None
    accuracy: float | None = None


def save_artifact(
    path: str | Path, names: list[str], weights: list[FloatArray], metadata: dict[str, Any]
) -> str:
    """Write the model and its metadata (data set, coalition, round, ε, …); return the SHA-256.

    ``metadata`` must be JSON-serialisable; it must name ``dataset``, ``model``, ``participants``,
    ``round``, ``epsilon``, ``network`` (the layers as plain data) and ``input_shape``. The network
    is built from ``network``, given ``weights`` (every layer's, by ``names``) and exported with
    ``torch.export`` for any batch size; the metadata goes into the archive beside it
    (:data:`~mots.client.model_file.METADATA_MEMBER`).
    """
    import io

    import torch

    from mots.client.model_file import FORMAT_MEMBER, ModelFileError, build_network

    for key in ("dataset", "model", "participants", "round", "epsilon", "network", "input_shape"):
        if key not in metadata:
            raise ArtifactError(f"metadata.{key} is required")
    if len(names) != len(weights):
        raise ArtifactError(f"names ({len(names)}) and weights ({len(weights)}) differ in length")
    meta = json.loads(json.dumps(metadata))  # plain JSON values only
    try:
        model = build_network(meta["network"])
        model.load_state_dict(
            {
                n: torch.from_numpy(np.ascontiguousarray(w))
                for n, w in zip(names, weights, strict=True)
            }
        )
    except (ModelFileError, RuntimeError, TypeError, KeyError) as exc:
        raise ArtifactError(f"metadata.network: the weights do not fit it ({exc})") from exc
    model.eval()
    example = torch.zeros(2, *(int(s) for s in meta["input_shape"]))
    batch = torch.export.Dim("batch")
    archive = io.BytesIO()
    with EXPORT_LOCK, torch.no_grad():  # one export at a time per process (EXPORT_LOCK)
        program = torch.export.export(model, (example,), dynamic_shapes=({0: batch},))
        torch.export.save(
            program,
            archive,
            extra_files={METADATA_MEMBER: json.dumps(meta), FORMAT_MEMBER: FORMAT},
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(archive.getvalue())
    tmp.replace(path)
    digest = sha256_file(path)
    write_sidecar(path, {**meta, "format": FORMAT, "file": path.name, "sha256": digest})
    return digest


def verify(path: str | Path, sha256: str) -> bool:
    """True iff the file at ``path`` has SHA-256 ``sha256`` (hex, case-insensitive)."""
    p = Path(path)
    return p.is_file() and sha256_file(p) == sha256.strip().lower()


def load_artifact(
    path: str | Path, sha256: str | None = None
) -> tuple[dict[str, FloatArray], dict[str, Any]]:
    """(state_dict as arrays, metadata); refuses a file whose digest differs from ``sha256``."""
    from mots.client.model_file import ModelFileError, file_metadata, load_state

    p = Path(path)
    if sha256 is not None and not verify(p, sha256):
        raise ArtifactError(f"artifact {p}: SHA-256 does not match {sha256}")
    try:
        meta = file_metadata(p)["metadata"]
        state = {k: v.numpy() for k, v in load_state(p).items()}
    except ModelFileError as exc:
        raise ArtifactError(f"artifact {exc}") from exc
    return state, dict(meta)


def load_model(path: str | Path, sha256: str | None = None) -> Any:
    """The artifact's model as a callable ``torch.nn.Module``: the one meaning of
    ``load_model`` (:func:`mots.client.model_file.load_model`, plain PyTorch)."""
    from mots.client.model_file import load_model as load

    return load(path, sha256)


def platform_model(path: str | Path, sha256: str | None = None) -> Any:
    """The artifact's model as the platform builds it: the network from the file's own
    ``network``, its weights loaded, in eval mode (what the evaluation measures; a buyer's one
    call, :func:`load_model`, gives the same predictions)."""
    import torch

    from mots.client.model_file import build_network

    state, meta = load_artifact(path, sha256)
    model = build_network(meta["network"])
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    model.eval()
    return model


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
        path = self.directory / f"round-{int(metadata['round']):04d}.pt2"
        if "test_metric" not in metadata:  # a task's round measured it on its evaluation data
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


def measure_test_metric(
    metadata: dict[str, Any], names: list[str], weights: list[FloatArray]
) -> dict[str, Any]:
    """The model's accuracy (and loss) on its data set's whole test split, as the model file
    records it for a buyer to check (``examples/buyer/classify.py`` measures the same)."""
    import torch

    from mots.training.datasets import load_dataset, to_float
    from mots.training.local import evaluate as evaluate_model
    from mots.training.models import build_model

    ds = load_dataset(str(metadata["dataset"]), metadata.get("data_dir"))
    c, h, w = (int(x) for x in metadata["input_shape"])
    model = build_model(str(metadata["model"]), (c, h, w), int(metadata.get("num_classes", 10)))
    model.load_state_dict(
        {n: torch.from_numpy(np.ascontiguousarray(a)) for n, a in zip(names, weights, strict=True)}
    )
    loss, accuracy = evaluate_model(
        model, torch.from_numpy(to_float(ds.x_test)), torch.from_numpy(ds.y_test)
    )
    return {
        "name": "accuracy",
        "value": float(accuracy),
        "loss": float(loss),
        "split": "test",
        "samples": len(ds.y_test),
    }


def evaluate(
    path: str | Path, *, data_dir: str | Path | None = None, test_subset: int | None = None
) -> tuple[float, float]:
    """(test loss, accuracy) of the artifact's model on its data set's test split."""
    import torch

    from mots.client.model_file import file_metadata
    from mots.training.datasets import load_dataset, to_float
    from mots.training.local import evaluate as evaluate_model
    from mots.training.local import torch_threads
    from mots.training.partition import evaluation_indices

    meta = file_metadata(path)["metadata"]
    model = platform_model(path)
    ds = load_dataset(
        str(meta["dataset"]), data_dir if data_dir is not None else meta.get("data_dir")
    )
    idx = evaluation_indices(len(ds.y_test), test_subset)
    with torch_threads(1):
        return evaluate_model(
            model, torch.from_numpy(to_float(ds.x_test[idx])), torch.from_numpy(ds.y_test[idx])
        )
