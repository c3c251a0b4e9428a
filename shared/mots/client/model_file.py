"""A downloaded model file ``mots-round-N.pt`` and its metadata sidecar ``mots-round-N.json``.

The ``.pt`` is a plain ``torch.save`` dict (format ``mots-model/1``, loads with
``torch.load(path, weights_only=True)``)::

    {"format": "mots-model/1",
     "metadata": {"dataset", "model", "participants" (K per type), "round" (FedAvg rounds),
                  "epsilon", "input_shape", "num_classes", "network" (the layers as plain
                  data), "preprocessing", "class_names", "test_metric", …},
     "state_dict": {layer name: float32 tensor}}

:func:`load_model` rebuilds the network from the file's own ``network`` with ``torch.nn``
alone, as ``examples/buyer/classify.py`` does without this project.

The ``.json`` beside it is the market's :class:`~mots.platform.api.market.ModelInfo` (round, file,
SHA-256, size, coalition, ε, the same metadata): readable without torch, and the file's digest
can be checked against it (:func:`read_model_info`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

FORMAT = "mots-model/1"


class ModelFileError(ValueError):
    """A model file or its sidecar is missing, unreadable or does not match its digest."""


def sidecar_path(path: str | Path) -> Path:
    """``mots-round-N.json`` for ``mots-round-N.pt``."""
    return Path(path).with_suffix(".json")


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_sidecar(path: str | Path, info: dict[str, Any]) -> Path:
    """Write a model's metadata beside it (atomically); returns the sidecar's path."""
    target = sidecar_path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def read_model_info(path: str | Path) -> dict[str, Any]:
    """The metadata of the model file at ``path`` from its sidecar, after checking that the
    file's SHA-256 is the one the sidecar records. No torch is imported."""
    model, side = Path(path), sidecar_path(path)
    try:
        info = json.loads(side.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(
            f"{side}: no metadata beside {model.name} (`mots market download` writes it)"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(f"{side}: not readable JSON ({exc})") from exc
    if not isinstance(info, dict) or not isinstance(info.get("sha256"), str):
        raise ModelFileError(f"{side}: no sha256 recorded")
    got = sha256_file(model)
    if got != info["sha256"].lower():
        raise ModelFileError(
            f"{model}: SHA-256 {got} differs from the {info['sha256']} its metadata records"
        )
    return info


def load_payload(path: str | Path) -> dict[str, Any]:
    """The ``.pt``'s dict (``format``, ``metadata``, ``state_dict`` of tensors), loaded with
    ``weights_only=True`` (no code in the file runs). Needs torch."""
    import torch

    payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ModelFileError(f"{path}: not a {FORMAT} file")
    return payload


LAYERS = frozenset({"Sequential", "Flatten", "Linear", "Conv2d", "ReLU", "MaxPool2d"})
"""The ``torch.nn`` classes a model file's ``network`` may name (nothing else is built)."""


def build_network(spec: dict[str, Any]) -> Any:
    """A ``torch.nn.Module`` from a model file's ``network`` description (plain PyTorch)."""
    from collections import OrderedDict

    from torch import nn

    kind = spec.get("type")
    if kind not in LAYERS:
        raise ModelFileError(f"network: layer type {kind!r} is not one of {sorted(LAYERS)}")
    if kind == "Sequential":
        return nn.Sequential(
            OrderedDict((str(layer["name"]), build_network(layer)) for layer in spec["layers"])
        )
    return getattr(nn, str(kind))(**dict(spec.get("args", {})))


def load_model(path: str | Path, sha256: str | None = None) -> Any:
    """The model file's network, with its weights, in eval mode (a ``torch.nn.Module``): the
    one meaning of ``load_model`` here. ``sha256`` (or the sidecar's digest, when there is one)
    is checked first; the network is rebuilt from the file's own description."""
    p = Path(path)
    if sha256 is None and sidecar_path(p).is_file():
        read_model_info(p)  # refuses a file that differs from its metadata
    elif sha256 is not None and sha256_file(p) != sha256.strip().lower():
        raise ModelFileError(f"{p}: SHA-256 does not match {sha256}")
    payload = load_payload(p)
    spec = payload["metadata"].get("network")
    if not isinstance(spec, dict):
        raise ModelFileError(f"{p}: no network description (written before issue 26)")
    model = build_network(spec)
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return model


def verify_origin(path: str | Path, public_key: str) -> dict[str, Any]:
    """Check offline that the market holding ``public_key`` (base64 ed25519, from its
    ``/.well-known/mots-model-key``) published the model file at ``path``: the file's SHA-256
    must be its sidecar's, and the sidecar's signature the key's on (round, SHA-256, price).
    Returns the sidecar's metadata; raises :class:`ModelFileError` naming what failed."""
    from mots.platform import model_signing

    info = read_model_info(path)  # the file matches its sidecar
    signature, price = info.get("signature"), info.get("price")
    if not isinstance(signature, str):
        raise ModelFileError(f"{sidecar_path(path)}: no signature (a market before issue 40)")
    round_id = info.get("round_id")
    if not isinstance(round_id, int):
        raise ModelFileError(f"{sidecar_path(path)}: no round_id recorded")
    message = model_signing.statement(round_id, str(info["sha256"]), price)
    if not model_signing.verify(public_key, message, signature):
        raise ModelFileError(
            f"signature: not made by key {model_signing.key_id(public_key)} on round {round_id},"
            f" SHA-256 {info['sha256']}, price {price}: the file's origin is not that market"
        )
    return info
