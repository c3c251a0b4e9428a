#!/usr/bin/env python3
"""Classify a test set with a MoTS model file, using PyTorch alone.

A buyer needs nothing of the MoTS project: the model file (``mots-round-N.pt2``, a ``torch.export``
archive, format ``mots-model/2``) loads in one call, ``torch.export.load(path).module()``, as a
callable network with its weights; its metadata (the preprocessing, the input shape, the class
names and the test accuracy the platform measured) is a JSON file inside the archive, read by the
same call. This script checks the file's SHA-256 against the ``.json`` the market sent beside it,
loads it, reads the test set, classifies every sample and prints one JSON line::

    {"accuracy": <measured here>, "metadata_accuracy": <the model's own record>}

usage: python classify.py MODEL_FILE [--data DIR]

A Fashion-MNIST model (no ``data_format`` in its metadata) reads DIR's four IDX files (.gz or
not; default: the model's data_dir, else Debian's /usr/share/datasets/fashion-mnist). A task's
model (docs/tasks.md) reads DIR in the task's own format, as a participant holds it: every
``*.npz`` file (arrays ``x`` and ``y``), or the CSV file with the task's feature and label columns.
"""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import hashlib
import json
import struct
import sys
import warnings
import zipfile
from pathlib import Path

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch without numpy
import torch  # noqa: E402

DEFAULT_DATA = Path("/usr/share/datasets/fashion-mnist")
METADATA = "mots/metadata.json"  # the metadata's name among the archive's extra files


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


NPY_DTYPES = {
    "|u1": torch.uint8,
    "<i8": torch.int64,
    "<i4": torch.int32,
    "<f4": torch.float32,
    "<f8": torch.float64,
}


def read_npy(raw: bytes) -> torch.Tensor:
    """One ``.npy`` array (format 1-3, C order, little-endian) without numpy."""
    if raw[:6] != b"\x93NUMPY":
        raise SystemExit("not an .npy array")
    size, start = (2, 8) if raw[6] == 1 else (4, 8)
    length = int.from_bytes(raw[start : start + size], "little")
    header = ast.literal_eval(raw[start + size : start + size + length].decode("latin1"))
    if header["fortran_order"] or header["descr"] not in NPY_DTYPES:
        raise SystemExit(f"unsupported .npy array {header}")
    body = bytearray(raw[start + size + length :])
    dtype = NPY_DTYPES[header["descr"]]
    return torch.frombuffer(body, dtype=dtype).reshape(header["shape"])


def read_task_data(
    directory: Path, fmt: dict, labels: list[str]
) -> tuple[torch.Tensor, torch.Tensor]:
    """A task's data folder in its own format: the ``*.npz`` files' x and y, or the CSV's
    feature columns and label column (label names or indices)."""
    if fmt["format"] == "npz":
        xs, ys = [], []
        for path in sorted(directory.glob("*.npz")):
            with zipfile.ZipFile(path) as z:
                xs.append(read_npy(z.read("x.npy")))
                ys.append(read_npy(z.read("y.npy")).long())
        if not xs:
            raise SystemExit(f"{directory}: no .npz file")
        return torch.cat(xs), torch.cat(ys)
    spec = fmt["csv"]
    names = {name: k for k, name in enumerate(labels)}
    rows, targets = [], []
    with (directory / spec["file"]).open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rows.append([float(row[c]) for c in spec["features"]])
            raw = row[spec["label"]].strip()
            targets.append(names[raw] if raw in names else int(raw))
    return torch.tensor(rows, dtype=torch.float32), torch.tensor(targets, dtype=torch.int64)


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
    parser.add_argument("--data", type=Path, help="the test set (IDX files, or a task's folder)")
    args = parser.parse_args()
    check_digest(args.model_file)
    extra = {METADATA: ""}
    model = torch.export.load(args.model_file, extra_files=extra).module()  # the one call
    meta = json.loads(extra[METADATA])
    prep = meta["preprocessing"]
    if "data_format" in meta:  # a task's model: the buyer's data in the task's own format
        if args.data is None:
            raise SystemExit(f"task {meta['dataset']}: give --data, a folder in its format")
        inputs, labels = read_task_data(args.data, meta["data_format"], meta["class_names"])
        x = inputs.reshape(-1, *meta["input_shape"]).float()
        flat = x.reshape(len(x), -1)
        flat -= torch.as_tensor(prep.get("offset", 0.0), dtype=torch.float32)
        x = (flat / torch.as_tensor(prep["divide_by"], dtype=torch.float32)).reshape(x.shape)
    else:
        data = args.data or Path(meta.get("data_dir") or DEFAULT_DATA)
        images = read_idx(data, "t10k-images-idx3-ubyte")
        labels = read_idx(data, "t10k-labels-idx1-ubyte").long()
        x = images.reshape(-1, *meta["input_shape"]).float() / prep["divide_by"]
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
