"""The model file's sidecar: its metadata reads without torch, and a changed file is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mots.client.model_file import (
    ModelFileError,
    file_metadata,
    load_state,
    read_model_info,
    write_sidecar,
)
from tests.mots.client.model_files import write_model


def _model(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "mots-round-3.pt2"
    meta = {"dataset": "fashion-mnist", "model": "logistic", "participants": [0, 2], "round": 2}
    digest = write_model(path, {**meta, "epsilon": 0.7})
    return path, digest


def test_metadata_reads_without_torch_and_checks_the_digest(tmp_path: Path) -> None:
    """read_model_info imports no torch; a byte changed in the .pt makes it refuse the file."""
    path, digest = _model(tmp_path)
    write_sidecar(path, {"round_id": 3, "sha256": digest, "participants": [0, 2]})
    code = (
        "import sys; from mots.client.model_file import read_model_info;"
        f"info = read_model_info({str(path)!r}); assert 'torch' not in sys.modules;"
        "print(info['round_id'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3"
    payload = file_metadata(path)
    assert payload["format"] == "mots-model/2" and payload["metadata"]["participants"] == [0, 2]
    assert load_state(path)["linear.weight"].shape == (10, 784)
    path.write_bytes(path.read_bytes()[:-1] + b"x")
    with pytest.raises(ModelFileError, match="differs from the"):
        read_model_info(path)


def test_missing_or_broken_sidecars_are_named(tmp_path: Path) -> None:
    """No sidecar, or one without a digest, is a ModelFileError naming the sidecar."""
    path, _ = _model(tmp_path)
    path.with_suffix(".json").unlink()
    with pytest.raises(ModelFileError, match="no metadata beside"):
        read_model_info(path)
    path.with_suffix(".json").write_text(json.dumps({"round_id": 3}))
    with pytest.raises(ModelFileError, match="no sha256 recorded"):
        read_model_info(path)
    path.with_suffix(".json").write_text("{")
    with pytest.raises(ModelFileError, match="not readable JSON"):
        read_model_info(path)
    torch.save({"state_dict": {}}, tmp_path / "x.pt")
    with pytest.raises(ModelFileError, match="not a mots-model/2 or mots-model/1 file"):
        file_metadata(tmp_path / "x.pt")
