"""Issue 40 item 5: `mots model info FILE` shows what a model is from the file alone (task,
classes, preprocessing, accuracy, ε, coalition, round), and checks a sidecar beside it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mots.cli.main import cli
from mots.training.datasets import CLASS_NAMES, PREPROCESSING
from tests.mots.client.model_files import write_model

META = {
    "dataset": "fashion-mnist",
    "model": "logistic",
    "participants": [0, 2],
    "round": 5,
    "rounds": 5,
    "epsilon": 0.7,
    "num_classes": 10,
    "input_shape": [1, 28, 28],
    "class_names": list(CLASS_NAMES["fashion-mnist"]),
    "preprocessing": dict(PREPROCESSING),
    "test_metric": {
        "name": "accuracy", "value": 0.7586, "loss": 0.7, "split": "test", "samples": 10000
    },
}  # fmt: skip


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "mots-round-3.pt2"
    write_model(path, META)
    return path


def test_info_reads_the_file_alone(tmp_path: Path) -> None:
    """Without the .json beside it: accuracy, classes, preprocessing, task and round."""
    path = _file(tmp_path)
    path.with_suffix(".json").unlink()
    result = CliRunner().invoke(cli, ["model", "info", str(path)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "task           image classification into 10 classes (fashion-mnist)" in out
    assert "accuracy       0.7586 on the test split (10000 samples" in out
    assert "classes        T-shirt/top, Trouser, Pullover" in out
    assert f"preprocessing  {dict(PREPROCESSING)}" in out
    assert "FedAvg round   5/5" in out and "coalition K    [0, 2]" in out
    assert "market round" not in out  # only the sidecar knows it
    shown = json.loads(CliRunner().invoke(cli, ["model", "info", str(path), "--json"]).stdout)
    assert shown["metadata"]["test_metric"]["value"] == 0.7586


def test_info_checks_a_sidecar_beside_the_file(tmp_path: Path) -> None:
    """With the sidecar, the market round shows; a file that differs from it is refused."""
    path = _file(tmp_path)
    side = json.loads(path.with_suffix(".json").read_text())
    path.with_suffix(".json").write_text(json.dumps({**side, "round_id": 3}))
    result = CliRunner().invoke(cli, ["model", "info", str(path)])
    assert result.exit_code == 0 and "market round   3" in result.stdout, result.output
    path.with_suffix(".json").write_text(json.dumps({**side, "sha256": "0" * 64}))
    refused = CliRunner().invoke(cli, ["model", "info", str(path)])
    assert refused.exit_code == 1 and "differs from the" in refused.output


def test_info_imports_no_torch(tmp_path: Path) -> None:
    """`mots model info` reads the archive's metadata with zipfile: torch is never imported."""
    import subprocess
    import sys

    path = _file(tmp_path)
    code = (
        "import sys; from click.testing import CliRunner; from mots.cli.model import model;"
        f"r = CliRunner().invoke(model, ['info', {str(path)!r}]);"
        "assert r.exit_code == 0, r.output; assert 'torch' not in sys.modules, 'torch';"
        "print(r.output.splitlines()[1])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "format         mots-model/2", out.stderr
