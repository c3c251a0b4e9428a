"""The model file's sidecar: its metadata reads without torch, and a changed file is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mots.client.model_file import ModelFileError, load_payload, read_model_info, write_sidecar
from mots.training.artifacts import save_artifact


def _model(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "mots-round-3.pt"
    meta = {"dataset": "fashion-mnist", "model": "logistic", "participants": [0, 2], "round": 2}
    digest = save_artifact(path, ["w"], [np.ones((2, 3), np.float32)], {**meta, "epsilon": 0.7})
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
    payload = load_payload(path)
    assert payload["metadata"]["participants"] == [0, 2]
    np.testing.assert_array_equal(payload["state_dict"]["w"].numpy(), np.ones((2, 3)))
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
    with pytest.raises(ModelFileError, match="not a mots-model/1 file"):
        load_payload(tmp_path / "x.pt")
