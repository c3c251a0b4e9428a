"""A downloaded model file ``mots-round-N.pt2`` and its metadata sidecar ``mots-round-N.json``.

The ``.pt2`` is a ``torch.export`` archive (format ``mots-model/2``, docs/training.md "The model
file"): the network as an exported graph of ATen operations with its weights, loaded in one call
with PyTorch alone, ``torch.export.load(path).module()``, plus the model's metadata as a JSON
member of the archive (``extra/mots/metadata.json``: ``dataset``, ``model``, ``participants`` (K
per type), ``round`` (FedAvg rounds), ``epsilon``, ``input_shape``, ``num_classes``, ``network``
(the layers as plain data), ``preprocessing``, ``class_names``, ``test_metric``, …), which
:func:`file_metadata` reads with :mod:`zipfile` alone (no torch). Files of the first format
(``mots-model/1``, a ``torch.save`` dict with a ``state_dict``) are still read.

The ``.json`` beside it is the market's :class:`~mots.platform.api.market.ModelInfo` (round, file,
SHA-256, size, coalition, ε, the same metadata, the market's signature): readable without torch,
and the file's digest can be checked against it (:func:`read_model_info`). The signature stays
there, outside the file: it covers the file's SHA-256 and the price, which only the market states,
and the file is written by the trainer before any market signs it.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from pathlib import Path
from typing import Any

FORMAT = "mots-model/2"
"""The format the platform writes: a ``torch.export`` archive with the metadata inside."""
EXPORT_LOCK = threading.RLock()
"""``torch.export``'s export, save, load and ``.module()`` keep global tracing state (one proxy
mode slot, one module hierarchy), so two threads of one process (the training worker's pool
trains two tasks' rounds at once) must not run them at the same time."""
FORMAT_V1 = "mots-model/1"
"""The first format (before issue 40): a ``torch.save`` dict, read for files bought before."""
METADATA_MEMBER = "mots/metadata.json"
"""The metadata's name among the archive's extra files (``<root>/extra/mots/metadata.json``)."""
FORMAT_MEMBER = "mots/format"
"""The format tag's name among the archive's extra files."""


class ModelFileError(ValueError):
    """A model file or its sidecar is missing, unreadable or does not match its digest."""


def sidecar_path(path: str | Path) -> Path:
    """``mots-round-N.json`` for ``mots-round-N.pt2``."""
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


def _extra_member(names: list[str], member: str) -> str | None:
    """The archive member holding extra file ``member`` (under the archive's root folder)."""
    suffix = f"/extra/{member}"
    found = [n for n in names if n.endswith(suffix) and n.count("/") == suffix.count("/")]
    return found[0] if len(found) == 1 else None


def file_metadata(path: str | Path) -> dict[str, Any]:
    """``{"format", "metadata"}`` of a model file, read from the file alone: a ``mots-model/2``
    archive's metadata member with :mod:`zipfile` (no torch, nothing in the file runs); a
    ``mots-model/1`` file with ``torch.load(weights_only=True)``."""
    p = Path(path)
    if zipfile.is_zipfile(p):
        with zipfile.ZipFile(p) as z:
            names = z.namelist()
            tag, meta = _extra_member(names, FORMAT_MEMBER), _extra_member(names, METADATA_MEMBER)
            if tag is not None and meta is not None:
                fmt = z.read(tag).decode("utf-8", "replace").strip()
                try:
                    metadata = json.loads(z.read(meta))
                except ValueError as exc:
                    raise ModelFileError(f"{p}: {METADATA_MEMBER} is not JSON ({exc})") from exc
                if fmt != FORMAT or not isinstance(metadata, dict):
                    raise ModelFileError(f"{p}: format {fmt!r}, not {FORMAT}")
                return {"format": fmt, "metadata": metadata}
    payload = _load_v1(p)
    return {"format": FORMAT_V1, "metadata": payload["metadata"]}


def _load_v1(path: Path) -> dict[str, Any]:
    """A ``mots-model/1`` file's dict, loaded with ``weights_only=True``."""
    import pickle

    import torch

    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, OSError, EOFError) as exc:
        raise ModelFileError(f"{path}: not a {FORMAT} or {FORMAT_V1} file ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_V1:
        raise ModelFileError(f"{path}: not a {FORMAT} or {FORMAT_V1} file")
    return payload


def check_archive(path: str | Path) -> None:
    """Refuse a ``torch.export`` archive that would make ``torch.export.load`` unpickle
    anything: ``torch.export.load`` unpickles weights or constants marked ``use_pickle``, custom
    and opaque objects, and retries its sample inputs (and a legacy weights file) with
    ``weights_only=False`` when they do not load safely, which runs whatever code the pickle
    names. A file the platform wrote has none of
    these (its weights are raw tensor bytes, its sample inputs plain tensors)."""
    import pickle

    import torch

    p = Path(path)
    with zipfile.ZipFile(p) as z:
        for name in z.namelist():
            if name.endswith("_config.json") and "/data/" in name:
                try:
                    config = dict(json.loads(z.read(name)).get("config", {}))
                except (ValueError, TypeError, AttributeError) as exc:
                    raise ModelFileError(f"{p}: {name} is not a weights config ({exc})") from exc
                for fqn, entry in config.items():
                    pickled = bool(entry.get("use_pickle"))
                    if pickled or not str(entry.get("path_name", "")).startswith(
                        ("weight_", "tensor_")
                    ):
                        raise ModelFileError(
                            f"{p}: {name} entry {fqn!r} is a pickled object, not raw tensor "
                            "bytes: refused (loading it would run code)"
                        )
            elif "/data/" in name and name.endswith(".pt"):  # sample inputs, legacy weights
                try:
                    torch.load(io.BytesIO(z.read(name)), weights_only=True)
                except (RuntimeError, pickle.UnpicklingError, EOFError) as exc:
                    raise ModelFileError(
                        f"{p}: {name} is not plain tensors: refused (loading it would run code)"
                    ) from exc


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
    """The model file's network with its weights, as a callable ``torch.nn.Module``: the one
    meaning of ``load_model`` here. ``sha256`` (or the sidecar's digest, when there is one) is
    checked first. A ``mots-model/2`` file is checked by :func:`check_archive`, then loaded as a
    buyer does with PyTorch alone, ``torch.export.load(path).module()`` (a graph captured in eval
    mode: the module refuses ``.eval()`` and ``.train()``, and needs neither); a ``mots-model/1``
    file is rebuilt from its own network description, in eval mode."""
    p = Path(path)
    if sha256 is None and sidecar_path(p).is_file():
        read_model_info(p)  # refuses a file that differs from its metadata
    elif sha256 is not None and sha256_file(p) != sha256.strip().lower():
        raise ModelFileError(f"{p}: SHA-256 does not match {sha256}")
    if file_metadata(p)["format"] == FORMAT:
        import torch

        check_archive(p)
        with EXPORT_LOCK:
            return torch.export.load(p).module()
    payload = _load_v1(p)
    spec = payload["metadata"].get("network")
    if not isinstance(spec, dict):
        raise ModelFileError(f"{p}: no network description (written before issue 26)")
    model = build_network(spec)
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return model


def load_state(path: str | Path) -> dict[str, Any]:
    """The model file's weights by layer name (float32 tensors), of either format."""
    p = Path(path)
    if file_metadata(p)["format"] == FORMAT:
        import torch

        check_archive(p)
        with EXPORT_LOCK:
            return {k: v.detach() for k, v in torch.export.load(p).state_dict.items()}
    return dict(_load_v1(p)["state_dict"])


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
