"""A participant's own data folder against its task (issue 36): what fits is read as the
model's inputs; shape, dtype, labels, format and too few samples are each refused in plain words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mots.tasks.local_data import LocalDataError, check_data, load_for_training, write_folder
from mots.tasks.task_file import DataSpec

IMAGES = DataSpec(
    format="npz", input_shape=(1, 4, 4), dtype="uint8", labels=["a", "b", "c"], scale=255.0
)
TABLE = DataSpec.model_validate(
    {
        "format": "csv",
        "input_shape": [2],
        "dtype": "float32",
        "labels": ["no", "yes"],
        "csv": {"features": ["height", "weight"], "label": "answer"},
        "offset": [1.0, 2.0],
        "scale": [2.0, 4.0],
    }
)


def _images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, 256, (n, 1, 4, 4), dtype=np.uint8), rng.integers(0, 3, n)


def test_a_fitting_folder_is_read_as_the_models_inputs(tmp_path: Path) -> None:
    """Two .npz files, in name order; pixels scaled by the task's 255; the verdict in words."""
    rng = np.random.default_rng(0)
    (x1, y1), (x2, y2) = _images(5, rng), _images(7, rng)
    np.savez(tmp_path / "a.npz", x=x1, y=y1)
    np.savez(tmp_path / "b.npz", x=x2, y=y2)
    check = check_data("tiny", IMAGES, tmp_path, min_samples=12)
    assert check.ok and check.samples == 12
    assert check.summary().startswith(f"{tmp_path} fits task tiny: 12 samples (a: ")
    x, y = load_for_training("tiny", IMAGES, tmp_path, 12)
    np.testing.assert_array_equal(x, np.concatenate([x1, x2]).astype(np.float32) / 255.0)
    np.testing.assert_array_equal(y, np.concatenate([y1, y2]))


def _write(folder: Path, **arrays: np.ndarray) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "data.npz", **arrays)  # type: ignore[arg-type]
    return folder


@pytest.mark.parametrize(
    ("arrays", "expected"),
    [
        (
            {"x": np.zeros((3, 1, 8, 8), np.uint8), "y": np.zeros(3, np.int64)},
            "each sample has shape [1, 8, 8], the task expects [1, 4, 4]",
        ),
        (
            {"x": np.zeros((3, 1, 4, 4), np.float32), "y": np.zeros(3, np.int64)},
            "x is float32, the task expects uint8",
        ),
        (
            {"x": np.zeros((3, 1, 4, 4), np.uint8), "y": np.array([0, 1, 5])},
            "1 samples carry a label that is not one of the task's 3 labels",
        ),
        (
            {"x": np.zeros((3, 1, 4, 4), np.uint8), "y": np.zeros(2, np.int64)},
            "y must be one integer label per sample (3)",
        ),
        ({"images": np.zeros((3, 1, 4, 4), np.uint8)}, "not the arrays x and y"),
    ],
    ids=["shape", "dtype", "labels", "label-count", "arrays"],
)
def test_data_that_does_not_fit_is_refused_in_plain_words(
    tmp_path: Path, arrays: dict[str, np.ndarray], expected: str
) -> None:
    """Each misfit: not ok, the reason in the summary, and training refuses with it."""
    folder = _write(tmp_path / "d", **arrays)
    check = check_data("tiny", IMAGES, folder)
    assert not check.ok and expected in check.summary(), check.summary()
    with pytest.raises(LocalDataError, match="does not fit task tiny"):
        load_for_training("tiny", IMAGES, folder)


def test_fewer_samples_than_attested_is_refused(tmp_path: Path) -> None:
    """A folder of 5 samples for a participant that attested D = 10."""
    x, y = _images(5, np.random.default_rng(1))
    folder = _write(tmp_path / "d", x=x, y=y)
    assert check_data("tiny", IMAGES, folder, min_samples=5).ok
    with pytest.raises(LocalDataError, match="holds 5 samples, fewer than the 10 this participant"):
        load_for_training("tiny", IMAGES, folder, 10)


def test_a_missing_or_empty_folder(tmp_path: Path) -> None:
    """No folder, or no file of the task's format in it."""
    assert "is not a folder" in check_data("tiny", IMAGES, tmp_path / "none").summary()
    assert "no .npz file in the folder" in check_data("tiny", IMAGES, tmp_path).summary()
    assert "no data.csv in the folder" in check_data("tab", TABLE, tmp_path).summary()


def test_a_csv_folder_round_trips_and_is_standardised(tmp_path: Path) -> None:
    """write_folder then read: label names, (x − offset) / scale per column."""
    x = np.array([[1.0, 2.0], [3.0, 10.0], [5.0, 6.0]], np.float32)
    y = np.array([0, 1, 1])
    write_folder(TABLE, tmp_path, x, y)
    assert (tmp_path / "data.csv").read_text().splitlines()[0] == "height,weight,answer"
    xs, ys = load_for_training("tab", TABLE, tmp_path, 3)
    np.testing.assert_allclose(xs, [[0.0, 0.0], [1.0, 2.0], [2.0, 1.0]])
    np.testing.assert_array_equal(ys, y)


def test_csv_mistakes(tmp_path: Path) -> None:
    """A missing column, a value that is not a number, an unknown label name."""
    csv = tmp_path / "data.csv"
    csv.write_text("height,answer\n1,no\n")
    assert "the header lacks the columns weight" in check_data("tab", TABLE, tmp_path).summary()
    csv.write_text("height,weight,answer\n1,tall,no\n2,3,maybe\n")
    summary = check_data("tab", TABLE, tmp_path).summary()
    assert "line 2: a feature is not a number" in summary
    assert "1 samples carry a label that is not one of the task's 2 labels (no, yes" in summary
