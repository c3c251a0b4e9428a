"""A participant's own data folder: read it, check it against the task, hand it to training.

Formats (the task file's ``data.format``): ``npz``, every ``*.npz`` file of the folder in name
order, each with an array ``x`` (N, *input_shape) of the task's dtype and ``y`` (N,) of label
indices; ``csv``, one CSV file with a header row naming the task's feature columns and its label
column (label names or indices). Nothing here sends data anywhere: the folder is read on the
device that holds it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mots.tasks.task_file import DataSpec

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


class LocalDataError(ValueError):
    """A data folder that does not fit its task; the message says why in plain words."""


@dataclass
class DataCheck:
    """What a data folder holds against what its task expects."""

    task: str
    path: Path
    samples: int = 0
    label_counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the folder fits the task."""
        return not self.problems

    def summary(self) -> str:
        """The verdict in plain words (what ``mots data check`` prints)."""
        if self.ok:
            labels = ", ".join(f"{k}: {v}" for k, v in self.label_counts.items() if v)
            return (
                f"{self.path} fits task {self.task}: {self.samples} samples "
                f"({labels or 'no labels'})"
            )
        lines = [f"{self.path} does not fit task {self.task}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def _read_npz(spec: DataSpec, folder: Path, problems: list[str]) -> tuple[np.ndarray, np.ndarray]:
    files = sorted(folder.glob("*.npz"))
    if not files:
        problems.append(f"no .npz file in the folder (the task expects {folder}/*.npz with x, y)")
        return np.empty((0, *spec.input_shape)), np.empty(0, dtype=np.int64)
    xs, ys = [], []
    for f in files:
        try:
            with np.load(f, allow_pickle=False) as z:
                if "x" not in z or "y" not in z:
                    problems.append(f"{f.name} holds {sorted(z.files)}, not the arrays x and y")
                    continue
                x, y = z["x"], z["y"]
        except (OSError, ValueError) as err:
            problems.append(f"{f.name} is not a readable .npz file ({err})")
            continue
        if tuple(x.shape[1:]) != spec.input_shape:
            problems.append(
                f"{f.name}: each sample has shape {list(x.shape[1:])}, the task expects "
                f"{list(spec.input_shape)}"
            )
            continue
        if str(x.dtype) != spec.dtype:
            problems.append(f"{f.name}: x is {x.dtype}, the task expects {spec.dtype}")
            continue
        if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
            problems.append(
                f"{f.name}: y must be one integer label per sample ({len(x)}), got "
                f"{y.dtype} of shape {list(y.shape)}"
            )
            continue
        xs.append(x)
        ys.append(y.astype(np.int64))
    if not xs:
        return np.empty((0, *spec.input_shape)), np.empty(0, dtype=np.int64)
    return np.concatenate(xs), np.concatenate(ys)


def _read_csv(spec: DataSpec, folder: Path, problems: list[str]) -> tuple[np.ndarray, np.ndarray]:
    assert spec.csv is not None
    path = folder / spec.csv.file
    empty = np.empty((0, *spec.input_shape)), np.empty(0, dtype=np.int64)
    if not path.is_file():
        problems.append(f"no {spec.csv.file} in the folder (the task expects a CSV file)")
        return empty
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in [*spec.csv.features, spec.csv.label] if c not in header]
        if missing:
            problems.append(f"{spec.csv.file}: the header lacks the columns {', '.join(missing)}")
            return empty
        rows, labels, bad = [], [], 0
        names = {name: k for k, name in enumerate(spec.labels)}
        for line, row in enumerate(reader, start=2):
            try:
                rows.append([float(row[c]) for c in spec.csv.features])
            except (TypeError, ValueError):
                bad += 1
                if bad == 1:
                    problems.append(f"{spec.csv.file} line {line}: a feature is not a number")
                continue
            raw = str(row[spec.csv.label]).strip()
            labels.append(
                names[raw] if raw in names else int(raw) if raw.lstrip("-").isdigit() else -1
            )
    x = np.asarray(rows, dtype=spec.dtype).reshape(-1, *spec.input_shape)
    return x, np.asarray(labels, dtype=np.int64)


def read_folder(spec: DataSpec, folder: str | Path) -> tuple[np.ndarray, IntArray, list[str]]:
    """(x, y, problems): the folder's samples in the task's format and what is wrong with them."""
    path = Path(folder)
    problems: list[str] = []
    if not path.is_dir():
        problems.append(f"{path} is not a folder")
        return np.empty((0, *spec.input_shape)), np.empty(0, dtype=np.int64), problems
    read = _read_npz if spec.format == "npz" else _read_csv
    x, y = read(spec, path, problems)
    outside = int(((y < 0) | (y >= spec.num_classes)).sum())
    if outside:
        problems.append(
            f"{outside} samples carry a label that is not one of the task's {spec.num_classes} "
            f"labels ({', '.join(spec.labels)}; as indices 0..{spec.num_classes - 1})"
        )
    if x.size and np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
        problems.append("some inputs are NaN or infinite")
    return x, y, problems


def check_data(
    task: str, spec: DataSpec, folder: str | Path, min_samples: int | None = None
) -> DataCheck:
    """Whether ``folder`` fits the task (shape, dtype, labels) and holds at least
    ``min_samples`` samples (the participant's attested D)."""
    _, y, problems = read_folder(spec, folder)
    check = DataCheck(task, Path(folder), len(y), problems=problems)
    if not problems and len(y) == 0:
        check.problems.append("it holds no samples")
    if min_samples is not None and len(y) < min_samples and (len(y) or not problems):
        check.problems.append(
            f"it holds {len(y)} samples, fewer than the {min_samples} this participant attested (D)"
        )
    counts = np.bincount(y[(y >= 0) & (y < spec.num_classes)], minlength=spec.num_classes)
    check.label_counts = {name: int(c) for name, c in zip(spec.labels, counts, strict=True)}
    return check


def preprocess(spec: DataSpec, x: np.ndarray) -> FloatArray:
    """The model's input: (x − offset) / scale as float32 (the model file's ``preprocessing``)."""
    out = x.astype(np.float32)
    flat = out.reshape(len(out), -1)
    offset = np.asarray(spec.offset, dtype=np.float32)
    if np.any(offset != 0):
        flat -= offset
    flat /= np.asarray(spec.scale, dtype=np.float32)
    return flat.reshape(out.shape)


def load_for_training(
    task: str, spec: DataSpec, folder: str | Path, min_samples: int | None = None
) -> tuple[FloatArray, IntArray]:
    """The folder's samples as the model's inputs and labels; :class:`LocalDataError` (the check's
    verdict) when the folder does not fit or holds fewer than ``min_samples``."""
    check = check_data(task, spec, folder, min_samples)
    if not check.ok:
        raise LocalDataError(check.summary())
    x, y, _ = read_folder(spec, folder)
    return preprocess(spec, x), y


def write_folder(spec: DataSpec, folder: str | Path, x: np.ndarray, y: IntArray) -> Path:
    """Write samples as a participant's folder in the task's format (``data.npz`` or the CSV)."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    if spec.format == "npz":
        np.savez(path / "data.npz", x=np.asarray(x, dtype=spec.dtype), y=y.astype(np.int64))
        return path
    assert spec.csv is not None
    with (path / spec.csv.file).open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*spec.csv.features, spec.csv.label])
        for row, label in zip(np.asarray(x).reshape(len(x), -1), y, strict=True):
            writer.writerow([repr(float(v)) for v in row] + [spec.labels[int(label)]])
    return path
