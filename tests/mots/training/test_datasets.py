"""Readers of IDX (MNIST/Fashion-MNIST), CIFAR-10 pickle batches and SVHN .mat, on files we write."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest

from mots.training.datasets import (
    DatasetFormatError,
    DatasetNotFoundError,
    load_dataset,
    read_idx,
    to_float,
)


def _idx_bytes(arr: np.ndarray) -> bytes:
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return head + arr.astype(np.uint8).tobytes()


def _write_idx_set(d: Path, n_train: int, n_test: int, gz: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    xtr = rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8)
    ytr = rng.integers(0, 10, n_train, dtype=np.uint8)
    xte = rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8)
    yte = rng.integers(0, 10, n_test, dtype=np.uint8)
    for stem, arr in (
        ("train-images-idx3-ubyte", xtr),
        ("train-labels-idx1-ubyte", ytr),
        ("t10k-images-idx3-ubyte", xte),
        ("t10k-labels-idx1-ubyte", yte),
    ):
        raw = _idx_bytes(arr)
        if gz:
            (d / f"{stem}.gz").write_bytes(gzip.compress(raw))
        else:
            (d / stem).write_bytes(raw)
    return xtr, ytr


@pytest.mark.parametrize("gz", [True, False])
def test_idx_roundtrip(tmp_path: Path, gz: bool) -> None:
    """MNIST-format files (gzipped or plain) read back as (N, 1, 28, 28) uint8 and int64 labels."""
    xtr, ytr = _write_idx_set(tmp_path, 12, 5, gz)
    ds = load_dataset("mnist", tmp_path)
    assert ds.x_train.shape == (12, 1, 28, 28) and ds.x_test.shape == (5, 1, 28, 28)
    np.testing.assert_array_equal(ds.x_train[:, 0], xtr)
    np.testing.assert_array_equal(ds.y_train, ytr.astype(np.int64))
    assert ds.input_shape == (1, 28, 28)


def test_idx_bad_magic_and_truncation(tmp_path: Path) -> None:
    """A file that is not IDX, or shorter than its header says, is refused with its path."""
    bad = tmp_path / "x"
    bad.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(DatasetFormatError, match="magic"):
        read_idx(bad)
    short = tmp_path / "y"
    short.write_bytes(_idx_bytes(np.zeros((3, 2), np.uint8))[:-1])
    with pytest.raises(DatasetFormatError, match="promises 6 bytes"):
        read_idx(short)


def test_missing_files_message_lists_them_and_how_to_get_them(tmp_path: Path) -> None:
    """The error names every file looked for, the directory, and where to get them."""
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("fashion-mnist", tmp_path / "nowhere")
    msg = str(info.value)
    for stem in ("train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert stem in msg
    assert "apt-get install -y dataset-fashion-mnist" in msg and "DATA.md" in msg
    with pytest.raises(DatasetNotFoundError, match=r"data_batch_1.*test_batch.*cifar"):
        load_dataset("cifar10", tmp_path)
    with pytest.raises(DatasetNotFoundError, match=r"train_32x32.mat.*housenumbers"):
        load_dataset("svhn", tmp_path)


def test_cifar10_batches(tmp_path: Path) -> None:
    """Five data batches plus test_batch (b'data' (N, 3072) row-major RGB, b'labels')."""
    rng = np.random.default_rng(1)
    first = None
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (4, 3072), dtype=np.uint8)
        first = data if first is None else first
        with (tmp_path / name).open("wb") as f:
            pickle.dump({b"data": data, b"labels": list(range(4))}, f)
    ds = load_dataset("cifar10", tmp_path)
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    np.testing.assert_array_equal(ds.x_train[0, 0].reshape(-1), first[0, :1024])  # red plane
    np.testing.assert_array_equal(ds.y_test, [0, 1, 2, 3])


def test_svhn_mat(tmp_path: Path) -> None:
    """X (32, 32, 3, N) and y (N, 1) with 10 meaning the digit 0."""
    from scipy.io import savemat

    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (32, 32, 3, 6), dtype=np.uint8)
    y = np.array([[10], [1], [2], [3], [9], [10]], dtype=np.uint8)
    savemat(tmp_path / "train_32x32.mat", {"X": x, "y": y})
    savemat(tmp_path / "test_32x32.mat", {"X": x[..., :2], "y": y[:2]})
    ds = load_dataset("svhn", tmp_path)
    assert ds.x_train.shape == (6, 3, 32, 32)
    np.testing.assert_array_equal(ds.y_train, [0, 1, 2, 3, 9, 0])
    np.testing.assert_array_equal(ds.x_train[1, 2], x[:, :, 2, 1])  # (H, W) of channel 2, sample 1


def test_real_fashion_mnist(fashion_dir: Path) -> None:
    """Debian's Fashion-MNIST: 60,000 train and 10,000 test images of 28×28, ten balanced classes."""
    ds = load_dataset("fashion-mnist", fashion_dir)
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert np.bincount(ds.y_test).tolist() == [1000] * 10
    x = to_float(ds.x_test[:10])
    assert x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0
