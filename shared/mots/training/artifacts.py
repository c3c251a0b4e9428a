"""Model artifacts: the global model of a round, with metadata, that the market sells and serves.

``<stem>.pt`` holds the weights and metadata (a plain ``torch.save`` dict that loads with
``weights_only=True``); ``<stem>.json`` beside it repeats the metadata and adds the file's SHA-256,
so a buyer can :func:`verify` what they downloaded against the digest the market published.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

FORMAT = "mots-model/1"
FloatArray = npt.NDArray[np.float32]


class ArtifactError(ValueError):
    """An artifact is malformed or does not match its digest."""


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_artifact(
    path: str | Path, names: list[str], weights: list[FloatArray], metadata: dict[str, Any]
) -> str:
    """Write the model and its metadata (data set, coalition, round, ε, …); return the SHA-256.

    ``metadata`` must be JSON-serialisable; it must name ``dataset``, ``model``, ``participants``,
    ``round`` and ``epsilon``.
    """
    import torch

    for key in ("dataset", "model", "participants", "round", "epsilon"):
        if key not in metadata:
            raise ArtifactError(f"metadata.{key} is required")
    if len(names) != len(weights):
        raise ArtifactError(f"names ({len(names)}) and weights ({len(weights)}) differ in length")
    meta = json.loads(json.dumps(metadata))  # plain JSON values only
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "metadata": meta,
        "state_dict": {
            n: torch.from_numpy(np.ascontiguousarray(w))
            for n, w in zip(names, weights, strict=True)
        },
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
    digest = sha256_file(path)
    sidecar = {**meta, "format": FORMAT, "file": path.name, "sha256": digest}
    path.with_suffix(".json").write_text(json.dumps(sidecar, indent=1, sort_keys=True))
    return digest


def verify(path: str | Path, sha256: str) -> bool:
    """True iff the file at ``path`` has SHA-256 ``sha256`` (hex, case-insensitive)."""
    p = Path(path)
    return p.is_file() and sha256_file(p) == sha256.strip().lower()


def load_artifact(
    path: str | Path, sha256: str | None = None
) -> tuple[dict[str, FloatArray], dict[str, Any]]:
    """(state_dict as arrays, metadata); refuses a file whose digest differs from ``sha256``."""
    import torch

    p = Path(path)
    if sha256 is not None and not verify(p, sha256):
        raise ArtifactError(f"artifact {p}: SHA-256 does not match {sha256}")
    payload = torch.load(p, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ArtifactError(f"artifact {p}: not a {FORMAT} file")
    state = {k: v.numpy() for k, v in payload["state_dict"].items()}
    return state, dict(payload["metadata"])


def load_model(path: str | Path, sha256: str | None = None) -> Any:
    """The artifact's model as a ``torch.nn.Module`` in eval mode: the one meaning of
    ``load_model`` (:func:`mots.client.model_file.load_model`, plain PyTorch)."""
    from mots.client.model_file import load_model as load

    return load(path, sha256)


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

    from mots.training.datasets import load_dataset, to_float
    from mots.training.local import evaluate as evaluate_model
    from mots.training.local import torch_threads
    from mots.training.partition import evaluation_indices

    _, meta = load_artifact(path)
    model = load_model(path)
    ds = load_dataset(
        str(meta["dataset"]), data_dir if data_dir is not None else meta.get("data_dir")
    )
    idx = evaluation_indices(len(ds.y_test), test_subset)
    with torch_threads(1):
        return evaluate_model(
            model, torch.from_numpy(to_float(ds.x_test[idx])), torch.from_numpy(ds.y_test[idx])
        )
