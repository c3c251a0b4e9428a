"""Artifacts: each round's model with metadata and SHA-256; verify refuses tampering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mots.training import artifacts
from mots.training.config import TrainConfig
from mots.training.runner import train_coalition


def test_train_coalition_saves_every_round(tiny: TrainConfig, tmp_path: Path) -> None:
    """R artifacts + manifest; the last one's digest is the result's; its test loss is ε."""
    res = train_coalition([1, 0, 2], tiny, artifact_dir=tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())["artifacts"]
    assert [a["round"] for a in manifest] == [1, 2, 3]
    assert res.artifact_path == tmp_path / "round-0003.pt"
    assert res.artifact_sha256 == manifest[-1]["sha256"]
    assert artifacts.verify(res.artifact_path, res.artifact_sha256)
    _, meta = artifacts.load_artifact(res.artifact_path, res.artifact_sha256)
    assert (
        meta["participants"] == [1, 0, 2]
        and meta["round"] == 3
        and meta["dataset"] == "fashion-mnist"
    )
    assert meta["epsilon"] == pytest.approx(res.epsilon)
    sidecar = json.loads(res.artifact_path.with_suffix(".json").read_text())
    assert sidecar["sha256"] == res.artifact_sha256
    loss, acc = artifacts.evaluate(res.artifact_path, test_subset=tiny.test_subset)
    assert loss == pytest.approx(res.epsilon, rel=1e-5) and 0.0 < acc <= 1.0


def test_tampered_artifact_refused(tiny: TrainConfig, tmp_path: Path) -> None:
    """One changed byte: verify is False and loading with the published digest raises."""
    res = train_coalition([0, 0, 1], tiny.model_copy(update={"rounds": 1}), artifact_dir=tmp_path)
    assert res.artifact_path is not None and res.artifact_sha256 is not None
    raw = bytearray(res.artifact_path.read_bytes())
    raw[-100] ^= 0xFF
    res.artifact_path.write_bytes(bytes(raw))
    assert not artifacts.verify(res.artifact_path, res.artifact_sha256)
    with pytest.raises(artifacts.ArtifactError, match="SHA-256"):
        artifacts.load_artifact(res.artifact_path, res.artifact_sha256)


def test_metadata_required(tmp_path: Path) -> None:
    """An artifact without its coalition or ε is refused, naming the missing key."""
    with pytest.raises(artifacts.ArtifactError, match=r"metadata\.epsilon"):
        artifacts.save_artifact(
            tmp_path / "m.pt",
            [],
            [],
            {"dataset": "x", "model": "logistic", "participants": [1], "round": 1},
        )
