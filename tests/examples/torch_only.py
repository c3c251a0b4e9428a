"""A virtual environment holding PyTorch and nothing of this project (issue 26: a buyer with
PyTorch alone). Built once per torch version with ``python -m venv`` and ``pip install
torch==VERSION`` (minutes: the wheel is large) under ``$MOTS_TORCH_ONLY_VENVS`` or
``~/.cache/mots``; every use checks that it still holds only torch and torch's own requirements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

VERSION = torch.__version__.split("+")[0]
TORCH_REQUIREMENTS = {
    "torch", "filelock", "fsspec", "jinja2", "markupsafe", "mpmath", "networkx", "sympy",
    "typing-extensions", "pip", "setuptools", "triton",
}  # fmt: skip
"""What ``pip install torch`` brings into an empty environment (and pip's own); nothing else."""


def torch_only_python() -> Path:
    """The interpreter of the torch-only environment, created when missing."""
    base = Path(os.environ.get("MOTS_TORCH_ONLY_VENVS") or Path.home() / ".cache" / "mots")
    venv = base / f"torch-only-venv-{VERSION}"
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"torch=={VERSION}"],
            check=True,
            timeout=1800,
        )
        (venv / ".complete").touch()
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert names <= TORCH_REQUIREMENTS, (
        f"{venv} holds more than torch: {names - TORCH_REQUIREMENTS}"
    )
    return python


def run_classify(python: Path, model_file: Path, *extra: str) -> dict[str, float]:
    """``examples/buyer/classify.py MODEL_FILE [EXTRA…]`` in the torch-only environment, with no
    PYTHONPATH (nothing of this project importable); its one JSON line."""
    script = Path(__file__).resolve().parents[2] / "examples" / "buyer" / "classify.py"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    out = subprocess.run(
        [str(python), "-I", str(script), str(model_file), *extra],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=model_file.parent,
        timeout=300,
    )
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    result: dict[str, float] = json.loads(lines[0])
    assert set(result) == {"accuracy", "metadata_accuracy"}, result
    return result
