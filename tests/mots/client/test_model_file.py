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


class _MakesADirectory:
    """Unpickled, it calls ``os.mkdir(path)``: what a hostile pickle can run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.mkdir, (str(self.path),)


def _with_member(path: Path, target: Path, suffix: str, data: bytes) -> Path:
    """A copy of the archive at ``path`` with the member ending in ``suffix`` replaced."""
    import zipfile

    with zipfile.ZipFile(path) as src, zipfile.ZipFile(target, "w") as dst:
        for item in src.infolist():
            body = data if item.filename.endswith(suffix) else src.read(item)
            dst.writestr(item, body)
    return target


def test_a_model_file_that_would_run_code_on_load_is_refused(tmp_path: Path) -> None:
    """The attack: torch.export.load falls back to a full unpickle of sample inputs that do not
    load with weights_only, so a crafted archive runs code in whoever loads it. load_model checks
    the archive first and refuses it, running nothing; a file the platform wrote passes."""
    import io

    from mots.client.model_file import check_archive, load_model

    good, _ = _model(tmp_path)
    marker = tmp_path / "ran"
    evil_inputs = io.BytesIO()
    torch.save(_MakesADirectory(marker), evil_inputs)
    evil = _with_member(
        good, tmp_path / "evil.pt2", "/data/sample_inputs/model.pt", evil_inputs.getvalue()
    )
    with pytest.raises(Exception):  # noqa: B017 (what torch raises after the code ran)
        torch.export.load(evil)
    assert marker.is_dir()  # the attack works on a plain torch.export.load
    marker.rmdir()
    with pytest.raises(ModelFileError, match="is not plain tensors: refused"):
        load_model(evil)
    assert not marker.exists()  # refused before anything ran
    config = json.dumps(
        {"config": {"linear.weight": {"path_name": "weight_0", "use_pickle": True}}}
    ).encode()
    pickled = _with_member(good, tmp_path / "p.pt2", "/model_weights_config.json", config)
    with pytest.raises(ModelFileError, match="pickled object, not raw tensor bytes"):
        check_archive(pickled)
    check_archive(good)
    assert load_model(good)(torch.zeros(1, 1, 28, 28)).shape == (1, 10)


def test_a_first_format_file_still_reads_and_loads(tmp_path: Path) -> None:
    """A mots-model/1 file (a torch.save dict, bought before the format changed) still shows its
    metadata and loads, rebuilt from its own network description."""
    from mots.client.model_file import build_network, load_model
    from mots.training.models import describe_network

    network = describe_network("logistic", (1, 28, 28), 10)
    net = build_network(network)
    meta = {"network": network, "input_shape": [1, 28, 28], "round": 1}
    path = tmp_path / "old.pt"
    torch.save({"format": "mots-model/1", "metadata": meta, "state_dict": net.state_dict()}, path)
    assert file_metadata(path) == {"format": "mots-model/1", "metadata": meta}
    x = torch.rand(2, 1, 28, 28)
    assert torch.equal(load_model(path)(x), net.eval()(x))
