"""docker/edge/slim.sh, what keeps the arm64 edge image under 600 MiB (issue 39): what it removes
is never imported on the edge's code paths, and it runs inside each pip RUN of the edge's
Dockerfile (a delete in a later layer would not make the image smaller)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLIM = ROOT / "docker" / "edge" / "slim.sh"
DOCKERFILE = ROOT / "docker" / "edge" / "Dockerfile"

# The edge's processes, as far as imports go: the agent and its health check, the warm node and
# the SuperNode's start path it drives, the ClientApp, and a training step of the edge trainer.
PROBE = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked (docker/edge/slim.sh removes it)")
sys.meta_path.insert(0, Block())
import edge.agent.__main__, edge.agent.runner, edge.agent.supernode, edge.agent.health
import edge.flower_app.client_app, mots.training.warm_node
import flwr.supernode.start_client_internal, flwr.supernode.cli
import flwr.supercore.object_store.object_store_factory, flwr.supernode.runtime.run_clientapp
import flwr.supercore.superexec.plugin, flwr.cli.install
from mots.training import datasets
from mots.training.config import TrainConfig
from mots.training.edge_trainer import handle_train
from mots.training.models import build_model
cfg = TrainConfig(data_dir=sys.argv[2], rounds=1, local_steps=2, batch_size=8)
ds = datasets.load_dataset(cfg.dataset, cfg.data_dir)
w = [v.numpy() for v in build_model(cfg.model, ds.input_shape, ds.num_classes).state_dict().values()]
req = {"config": cfg.model_dump(mode="json"), "type_index": 0, "client_index": 0, "round": 0}
w, metrics = handle_train(req, w)
print("trained", metrics["samples"])
"""
DATA = Path("/usr/share/datasets/fashion-mnist")


def removed_packages() -> set[str]:
    """The import names of what slim.sh uninstalls (pip's names are the import names here)."""
    found: set[str] = set()
    for line in re.findall(r"pip uninstall --yes --quiet ([a-z ]+)", SLIM.read_text()):
        found |= set(line.split())
    return found


def _probe(blocked: set[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(sorted(blocked)), str(DATA)],
        capture_output=True, text=True, timeout=300, check=False,
        env={"PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_slim_removes_what_the_plan_says() -> None:
    """The packages named in the issue's measurement: torch's compile-time helpers, uvicorn's
    speedups, pip itself."""
    assert removed_packages() >= {"sympy", "mpmath", "networkx", "uvloop", "pip", "setuptools"}
    text = SLIM.read_text()
    for path in ("torch/include", "torch/share/cmake", "strip --strip-unneeded", "bin/uv"):
        assert path in text.replace('"$SITE/', "").replace('"$VENV_BIN/', "bin/"), path


@pytest.mark.skipif(not DATA.is_dir(), reason="no Fashion-MNIST (make system installs it)")
def test_edge_code_paths_run_without_what_slim_removes() -> None:
    """With every removed package blocked, the edge's modules import and a training step runs."""
    proc = _probe(removed_packages())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "trained" in proc.stdout


@pytest.mark.skipif(not DATA.is_dir(), reason="no Fashion-MNIST (make system installs it)")
def test_the_probe_fails_when_a_needed_package_is_blocked() -> None:
    """The same probe with grpc blocked (the SuperNode's transport) fails: it can catch a cut."""
    proc = _probe(removed_packages() | {"grpc"})
    assert proc.returncode != 0 and "grpc is blocked" in proc.stderr


def test_slim_runs_in_each_pip_layer_of_the_edge_image() -> None:
    """Each RUN that pip-installs into the venv ends with slim.sh, in the same RUN; the venv is
    made without pip (each such RUN bootstraps it; slim.sh removes it)."""
    text = DOCKERFILE.read_text()
    assert "RUN python -m venv --without-pip /opt/venv" in text
    runs = [
        r for r in re.split(r"\n(?=[A-Z]+ )", text) if r.startswith("RUN") and "pip install" in r
    ]
    assert len(runs) == 2
    assert "slim.sh torch" in runs[0] and "slim.sh deps" in runs[1]
    for run in runs:
        assert (
            run.index("touch /tmp/.slim-start")
            < run.index("pip install")
            < run.index("bash /usr/local/bin/slim.sh")
        )
