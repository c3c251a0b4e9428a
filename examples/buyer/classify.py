#!/usr/bin/env python3
"""Classify the Fashion-MNIST test set with a MoTS model file, using PyTorch alone.

A buyer needs nothing of the MoTS project: the model file (``mots-round-N.pt``, a plain
``torch.save`` dict loaded with ``weights_only=True``) carries the network as plain data, its
weights, the preprocessing, the input shape, the class names and the test accuracy the platform
measured. This script rebuilds the network with ``torch.nn``, reads the test set's IDX files,
classifies every image and prints one JSON line::

    {"accuracy": <measured here>, "metadata_accuracy": <the model's own record>}

usage: python classify.py MODEL_FILE [--data DIR]   (DIR: the four IDX files, .gz or not;
default: the model's data_dir, else Debian's /usr/share/datasets/fashion-mnist)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import struct
import sys
import warnings
from collections import OrderedDict
from pathlib import Path

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch without numpy
import torch  # noqa: E402
from torch import nn  # noqa: E402

LAYERS = {"Sequential", "Flatten", "Linear", "Conv2d", "ReLU", "MaxPool2d"}
DEFAULT_DATA = Path("/usr/share/datasets/fashion-mnist")


def build(spec: dict) -> nn.Module:
    """A torch.nn module from the model file's ``network`` description (known layers only)."""
    kind = spec["type"]
    if kind not in LAYERS:
        raise SystemExit(f"network: unknown layer type {kind!r}")
    if kind == "Sequential":
        layers = spec["layers"]
        return nn.Sequential(OrderedDict((str(layer["name"]), build(layer)) for layer in layers))
    return getattr(nn, kind)(**spec.get("args", {}))


def read_idx(directory: Path, stem: str) -> torch.Tensor:
    """An IDX file (gzipped or not) as a uint8 tensor of its dimensions."""
    for path in (directory / f"{stem}.gz", directory / stem):
        if path.is_file():
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rb") as f:
                data = f.read()
            ndim = data[3]
            dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
            body = bytearray(data[4 + 4 * ndim :])
            return torch.frombuffer(body, dtype=torch.uint8).reshape(dims)
    raise SystemExit(f"{directory}: no {stem}(.gz)")


def check_digest(model_file: Path) -> None:
    """If the metadata file the market sent (``.json`` beside it) is there, the model's SHA-256
    must be the one it records."""
    sidecar = model_file.with_suffix(".json")
    if sidecar.is_file():
        want = json.loads(sidecar.read_text())["sha256"].lower()
        got = hashlib.sha256(model_file.read_bytes()).hexdigest()
        if got != want:
            raise SystemExit(f"{model_file}: SHA-256 {got} differs from {want} in {sidecar.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_file", type=Path)
    parser.add_argument("--data", type=Path, help="the test set's IDX files")
    args = parser.parse_args()
    check_digest(args.model_file)
    payload = torch.load(args.model_file, map_location="cpu", weights_only=True)
    meta = payload["metadata"]
    model = build(meta["network"])
    model.load_state_dict(payload["state_dict"])
    model.eval()
    data = args.data or Path(meta.get("data_dir") or DEFAULT_DATA)
    images = read_idx(data, "t10k-images-idx3-ubyte")
    labels = read_idx(data, "t10k-labels-idx1-ubyte").long()
    x = images.reshape(-1, *meta["input_shape"]).float() / meta["preprocessing"]["divide_by"]
    correct = 0
    with torch.no_grad():
        for start in range(0, len(labels), 4096):
            predicted = model(x[start : start + 4096]).argmax(1)
            correct += int((predicted == labels[start : start + 4096]).sum())
    print(
        json.dumps(
            {
                "accuracy": correct / len(labels),
                "metadata_accuracy": meta["test_metric"]["value"],
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
