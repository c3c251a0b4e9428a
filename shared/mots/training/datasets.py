"""Readers for the paper's data sets from a directory the user names (no downloads: machines are offline).

MNIST and Fashion-MNIST: gzipped (or plain) IDX files; CIFAR-10: the python pickle batches;
SVHN: the ``.mat`` files. Images are kept as uint8 (N, C, H, W) and scaled to [0, 1] when used.
A missing file raises :class:`DatasetNotFoundError` naming every file looked for and how to get it.
"""

from __future__ import annotations

import functools
import gzip
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

DEFAULT_DIRS: dict[str, Path] = {
    "fashion-mnist": Path("/usr/share/datasets/fashion-mnist"),
    "mnist": Path("/usr/share/datasets/mnist"),
    "cifar10": Path("/usr/share/datasets/cifar-10-batches-py"),
    "svhn": Path("/usr/share/datasets/svhn"),
}

HOW_TO_GET = {
    "fashion-mnist": "apt-get install -y dataset-fashion-mnist (Debian), or the four .gz files of "
    "github.com/zalandoresearch/fashion-mnist; see shared/DATA.md",
    "mnist": "the four IDX files of yann.lecun.com/exdb/mnist (gzipped or not); see shared/DATA.md",
    "cifar10": "cifar-10-python.tar.gz from www.cs.toronto.edu/~kriz/cifar.html, unpacked "
    "(the cifar-10-batches-py directory); see shared/DATA.md",
    "svhn": "train_32x32.mat and test_32x32.mat from ufldl.stanford.edu/housenumbers; "
    "see shared/DATA.md",
}

IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
CIFAR_FILES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")
SVHN_FILES = ("train_32x32.mat", "test_32x32.mat")

UInt8Array = npt.NDArray[np.uint8]
IntArray = npt.NDArray[np.int64]


CLASS_NAMES: dict[str, list[str]] = {
    "fashion-mnist": [
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
    ],
    "mnist": [str(d) for d in range(10)],
    "cifar10": [
        "airplane", "automobile", "bird", "cat", "deer",
        "dog", "frog", "horse", "ship", "truck",
    ],
    "svhn": [str(d) for d in range(10)],
}  # fmt: skip
"""Each data set's label names, by label index (what a buyer's classifier prints)."""

PREPROCESSING: dict[str, object] = {
    "input": "uint8 pixels 0-255, channels first: (N, C, H, W)",
    "dtype": "float32",
    "divide_by": 255.0,
    "formula": "x = pixels.float() / 255.0",
}
"""What :func:`to_float` does, as plain data for the model file (no mean or std is subtracted)."""


class DatasetNotFoundError(FileNotFoundError):
    """A data set's files are missing; the message lists them and says how to get them."""


class DatasetFormatError(ValueError):
    """A data set's file exists but does not hold what its format promises."""


@dataclass(frozen=True)
class Dataset:
    """Train and test split of an image classification data set (uint8 images, int64 labels)."""

    name: str
    x_train: UInt8Array
    y_train: IntArray
    x_test: UInt8Array
    y_test: IntArray
    num_classes: int = 10

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one image."""
        c, h, w = self.x_train.shape[1:]
        return int(c), int(h), int(w)


def _missing(name: str, directory: Path, files: list[str]) -> DatasetNotFoundError:
    listed = ", ".join(files)
    return DatasetNotFoundError(
        f"data set {name!r}: looked in {directory} for {listed} and did not find them all. "
        f"How to get them: {HOW_TO_GET[name]}."
    )


def read_idx(path: Path) -> npt.NDArray[np.uint8]:
    """One IDX file (magic 0x0000 08 nd, big-endian dims, unsigned bytes), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DatasetFormatError(f"{path}: not an IDX file of unsigned bytes (bad magic number)")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    expected = int(np.prod(dims)) if dims else 0
    if len(raw) - offset != expected:
        raise DatasetFormatError(
            f"{path}: header promises {expected} bytes of data for shape {dims}, "
            f"file holds {len(raw) - offset}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


def _find_idx(directory: Path, stem: str) -> Path | None:
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.is_file():
            return candidate
    return None


def load_idx_dataset(name: str, directory: Path) -> Dataset:
    """MNIST-format data set: the four IDX files, gzipped or plain."""
    paths = [_find_idx(directory, stem) for stem in IDX_FILES]
    if any(p is None for p in paths):
        raise _missing(name, directory, [f"{s}.gz (or {s})" for s in IDX_FILES])
    xtr, ytr, xte, yte = (read_idx(p) for p in paths if p is not None)
    for x, y, split in ((xtr, ytr, "train"), (xte, yte, "t10k")):
        if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise DatasetFormatError(
                f"{directory}: {split} images {x.shape} and labels {y.shape} do not match"
            )
    return Dataset(
        name,
        np.ascontiguousarray(xtr[:, None, :, :]),
        ytr.astype(np.int64),
        np.ascontiguousarray(xte[:, None, :, :]),
        yte.astype(np.int64),
    )


def _read_cifar_batch(path: Path) -> tuple[UInt8Array, IntArray]:
    with path.open("rb") as f:
        batch = pickle.load(f, encoding="bytes")
    try:
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch[b"labels"], dtype=np.int64)
    except (KeyError, TypeError) as err:
        raise DatasetFormatError(
            f"{path}: not a CIFAR-10 batch (needs b'data' and b'labels')"
        ) from err
    if data.ndim != 2 or data.shape[1] != 3072 or data.shape[0] != labels.shape[0]:
        raise DatasetFormatError(
            f"{path}: data {data.shape} is not (N, 3072) matching {labels.shape}"
        )
    return data.reshape(-1, 3, 32, 32), labels


def load_cifar10(directory: Path) -> Dataset:
    """CIFAR-10 python version: data_batch_1..5 and test_batch."""
    paths = [directory / f for f in CIFAR_FILES]
    if not all(p.is_file() for p in paths):
        raise _missing("cifar10", directory, list(CIFAR_FILES))
    train = [_read_cifar_batch(p) for p in paths[:5]]
    xte, yte = _read_cifar_batch(paths[5])
    return Dataset(
        "cifar10",
        np.concatenate([x for x, _ in train]),
        np.concatenate([y for _, y in train]),
        xte,
        yte,
    )


def _read_svhn(path: Path) -> tuple[UInt8Array, IntArray]:
    try:
        from scipy.io import loadmat
    except ImportError as err:  # pragma: no cover - scipy ships with the train extra
        raise ImportError("reading SVHN .mat files needs scipy (pip install scipy)") from err
    mat = loadmat(path)
    if "X" not in mat or "y" not in mat:
        raise DatasetFormatError(f"{path}: not an SVHN .mat file (needs X and y)")
    x = np.asarray(mat["X"], dtype=np.uint8)
    y = np.asarray(mat["y"], dtype=np.int64).reshape(-1)
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != y.shape[0]:
        raise DatasetFormatError(f"{path}: X {x.shape} is not (32, 32, 3, N) matching y {y.shape}")
    y = np.where(y == 10, 0, y)  # SVHN labels the digit 0 as 10
    return np.ascontiguousarray(x.transpose(3, 2, 0, 1)), y


def load_svhn(directory: Path) -> Dataset:
    """SVHN cropped digits: train_32x32.mat and test_32x32.mat (label 10 means digit 0)."""
    paths = [directory / f for f in SVHN_FILES]
    if not all(p.is_file() for p in paths):
        raise _missing("svhn", directory, list(SVHN_FILES))
    xtr, ytr = _read_svhn(paths[0])
    xte, yte = _read_svhn(paths[1])
    return Dataset("svhn", xtr, ytr, xte, yte)


@functools.lru_cache(maxsize=4)
def _load_cached(name: str, directory: Path) -> Dataset:
    if name in ("fashion-mnist", "mnist"):
        return load_idx_dataset(name, directory)
    if name == "cifar10":
        return load_cifar10(directory)
    if name == "svhn":
        return load_svhn(directory)
    raise ValueError(f"dataset must be one of {sorted(DEFAULT_DIRS)}, got {name!r}")


def load_dataset(name: str, data_dir: str | Path | None = None) -> Dataset:
    """Load (and cache in memory) data set ``name`` from ``data_dir`` or its default directory."""
    if name not in DEFAULT_DIRS:
        raise ValueError(f"dataset must be one of {sorted(DEFAULT_DIRS)}, got {name!r}")
    directory = Path(data_dir) if data_dir is not None else DEFAULT_DIRS[name]
    return _load_cached(name, directory.expanduser().resolve())


def to_float(images: UInt8Array) -> npt.NDArray[np.float32]:
    """Pixels scaled to [0, 1] as float32 (the scaling the defaults were measured with)."""
    return images.astype(np.float32) / np.float32(255.0)
