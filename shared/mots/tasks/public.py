"""Public data sets this machine holds without a download, for demos (``mots data split``) and
as the platform's own evaluation data: Fashion-MNIST (Debian's IDX files), and scikit-learn's
bundled UCI digits (8×8) and breast cancer (30 features) sets (shared/DATA.md).

The scikit-learn sets ship without a test split; one is cut here, a seeded 20% of the samples,
so every reader of a set (the split, the evaluation) sees the same train and test samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

TEST_SHARE = 0.2
SPLIT_SEED = 20260


@dataclass(frozen=True)
class PublicSet:
    """A public set's train and test split: inputs as the task's dtype, int64 labels."""

    x_train: npt.NDArray[np.generic]
    y_train: npt.NDArray[np.int64]
    x_test: npt.NDArray[np.generic]
    y_test: npt.NDArray[np.int64]


def _fashion_mnist() -> PublicSet:
    from mots.training.datasets import load_dataset

    ds = load_dataset("fashion-mnist")
    return PublicSet(ds.x_train, ds.y_train, ds.x_test, ds.y_test)


def _cut(x: npt.NDArray[np.generic], y: npt.NDArray[np.int64]) -> PublicSet:
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = round(len(y) * TEST_SHARE)
    test, train = order[:n_test], order[n_test:]
    return PublicSet(x[train], y[train], x[test], y[test])


SKLEARN_FILES = {"load_digits": "digits.csv.gz", "load_breast_cancer": "breast_cancer.csv"}
"""The CSV file of scikit-learn's package that each loader reads (sklearn/datasets/data/)."""


def _bundled(loader: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]] | None:
    """(data, target) read from the CSV file scikit-learn ships, as its ``loader`` reads it
    (digits: 64 pixels then the label; breast cancer: a header line, 30 features then the
    label), without importing scikit-learn (1-3 s, with SciPy, in every ServerApp process that
    evaluates a task); None when the installed package holds no such file."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "datasets" / "data" / SKLEARN_FILES[loader]
        if path.is_file():
            skip = 1 if loader == "load_breast_cancer" else 0
            table = np.loadtxt(path, delimiter=",", skiprows=skip, dtype=np.float64)
            return table[:, :-1], table[:, -1].astype(np.int64)
    return None


def _sklearn(loader: str) -> Callable[[], PublicSet]:
    def read() -> PublicSet:
        found = _bundled(loader)
        if found is None:
            try:
                import sklearn.datasets as skd
            except ImportError as err:
                raise ImportError(
                    f"public set {loader}: needs scikit-learn (pip install scikit-learn), whose "
                    "package ships the data"
                ) from err
            bunch = getattr(skd, loader)()
            found = (np.asarray(bunch.data), np.asarray(bunch.target, dtype=np.int64))
        x, target = found
        if loader == "load_digits":  # 8×8 pixels of 0..16, as (N, 1, 8, 8) bytes
            x = x.reshape(-1, 1, 8, 8).astype(np.uint8)
        else:
            x = x.astype(np.float32)
        return _cut(x, target)

    return read


PUBLIC_SETS: dict[str, Callable[[], PublicSet]] = {
    "fashion-mnist": _fashion_mnist,
    "sklearn-digits": _sklearn("load_digits"),
    "sklearn-breast-cancer": _sklearn("load_breast_cancer"),
}
"""Public set name → its reader."""


def load_public(name: str) -> PublicSet:
    """The public set ``name`` (one of :data:`PUBLIC_SETS`)."""
    if name not in PUBLIC_SETS:
        raise ValueError(
            f"public set must be one of {', '.join(sorted(PUBLIC_SETS))}, got {name!r}"
        )
    return PUBLIC_SETS[name]()


def breast_cancer_columns() -> list[str]:
    """The 30 feature names of the breast cancer set, as CSV column names (spaces → '_')."""
    import sklearn.datasets as skd

    return [str(n).replace(" ", "_") for n in skd.load_breast_cancer().feature_names]
