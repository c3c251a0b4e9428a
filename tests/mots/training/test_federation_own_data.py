"""The local federation on the devices' own data (issue 36): `mots data split` makes each
participant's folder, `mots federation up --data fashion-mnist=DIR` points each SuperNode at its
own (node config ``data-fashion-mnist``), and Flower's training on those folders equals the
in-process run on the public set's partition; a node whose folder holds fewer samples than its
type's D fails its round and is not paid."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mots.training.config import TrainConfig
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.runner import train_coalition

MOTS = str(Path(sys.executable).parent / "mots")


def _mots(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MOTS, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.integration
def test_nodes_train_on_their_own_folders_like_inprocess(fashion_dir: Path, tmp_path: Path) -> None:
    """K = (1, 0, 1) on folders cut by the split: the losses of the in-process engine; then the
    type-3 node's folder is swapped for a type-1 one (50 < 300 samples): it fails verification
    of its round (no update), the other participant still completes."""
    data = tmp_path / "data"
    split = _mots("data", "split", "fashion-mnist", str(data), "--counts", "1,1,1")
    assert split.returncode == 0, split.stdout + split.stderr
    port = free_port_block(ports_needed(3))
    workdir = tmp_path / "fed"
    up = _mots(
        "federation", "up", "--nodes", "3", "--counts", "1,1,1", "--port", str(port),
        "--workdir", str(workdir), "--data", f"fashion-mnist={data}",
    )  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    fed = LocalFederation.attach(workdir)
    try:
        assert 'data-fashion-mnist="' + str(data / "type-3-000") in fed.node_config(2)
        cfg = TrainConfig(
            data_dir=fashion_dir, counts=(1, 1, 1), rounds=2, local_steps=5, test_subset=500
        )
        res = train_coalition([1, 0, 1], cfg, engine="deployment", federation=fed)
        ref = train_coalition([1, 0, 1], cfg)
        np.testing.assert_allclose(res.losses, ref.losses, rtol=1e-4)
        assert res.metadata["completed_participants"] == [1, 0, 1]

        shutil.rmtree(data / "type-3-000")
        shutil.copytree(data / "type-1-000", data / "type-3-000")  # 50 samples, D_3 = 300
        short = train_coalition([1, 0, 1], cfg, engine="deployment", federation=fed)
        assert short.metadata["completed_participants"] == [1, 0, 0]
    finally:
        down = _mots("federation", "down", "--workdir", str(workdir))
    assert down.returncode == 0, down.stdout + down.stderr
