"""The deployment-engine launcher: ``flwr run`` the MoTS Flower app on a federation.

The federation is a :class:`LocalFederation` this process started, or an
:class:`ExternalSuperLink` (the deployed SuperLink with the edge devices' SuperNodes).

Writes the run config (TrainConfig, participants, the federation's node map and verification
policy, output directory), submits the app to the SuperLink's Control API with ``flwr run`` (over
TLS), follows ``progress.jsonl`` that the ServerApp appends each round (progress callbacks), and
reads ``result.json`` when the run ends. The result says, per participant, whether its updates
were verified in every round it was asked for (``completed_participants`` counts those per type),
or it dropped out or failed verification; a model the quality gate refuses raises
:class:`QualityGateError` (the round is then settled by rule).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Collection
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mots.training import flower_messages as fm
from mots.training.artifacts import TrainingResult
from mots.training.config import TrainConfig
from mots.training.external_superlink import CONNECTION, Federation
from mots.training.federation import LocalFederation
from mots.training.processes import free_port_block, ports_needed
from mots.training.progress import RoundProgress
from mots.training.removal import NodePruner
from mots.training.settings import TrainingSettings
from mots.training.verification import VerificationPolicy

if TYPE_CHECKING:
    from mots.tasks.task_file import MarketTask

log = logging.getLogger(__name__)


class DeploymentError(RuntimeError):
    """The Flower run failed or did not finish in time; the message carries the reason."""

    def __init__(self, message: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.result = result or {}


class QualityGateError(DeploymentError):
    """Training finished but the final model may not be published (non-finite, or far worse
    than the untrained model or the quote); ``result`` holds the run's record."""


def app_dir(settings: TrainingSettings | None = None) -> Path:
    """Directory of the Flower app that ``flwr run`` submits (holding its pyproject.toml).

    ``MOTS_SERVER_APP_DIR`` when set, else the directory of the installed ``edge.flower_app``
    package.
    """
    configured = (settings or TrainingSettings()).server_app_dir
    if configured is not None:
        path, origin = Path(configured), "MOTS_SERVER_APP_DIR"
    else:
        try:
            path = Path(str(resources.files("edge.flower_app")))
        except ModuleNotFoundError as exc:
            raise DeploymentError(
                "Flower app not found: edge.flower_app is not installed; set MOTS_SERVER_APP_DIR"
            ) from exc
        origin = "the installed edge.flower_app package"
    if not (path / "pyproject.toml").is_file():
        raise DeploymentError(
            f"Flower app not found: {origin} gives {path}, without pyproject.toml"
        )
    return path


def _flwr_env(federation: Federation) -> dict[str, str]:
    env = dict(os.environ)
    env["FLWR_HOME"] = str(federation.flwr_home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_status(federation: Federation, run_id: int) -> str:
    """Flower's status text of a run ("running", "finished:completed", …; "" when unknown)."""
    env = _flwr_env(federation)
    flwr = shutil.which("flwr", path=env["PATH"]) or "flwr"
    try:
        proc = subprocess.run(
            [flwr, "ls", CONNECTION, "--run-id", str(run_id), "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        found = re.search(r'"status":\s*"([^"]*)"', proc.stdout)
    except subprocess.TimeoutExpired:
        return ""
    return found.group(1) if found else ""


def submit(federation: Federation, overrides: dict[str, Any], run_dir: Path) -> int:
    """``flwr run <app> mots-local --run-config FILE``; return the run id."""
    cfg_file = run_dir / "run-config.toml"
    cfg_file.write_text(fm.to_toml(overrides))
    env = _flwr_env(federation)
    flwr = shutil.which("flwr", path=env["PATH"]) or "flwr"
    proc = subprocess.run(
        [
            flwr,
            "run",
            str(app_dir()),
            CONNECTION,
            "--format",
            "json",
            "--run-config",
            str(cfg_file),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    try:
        start = proc.stdout.index("{")
        payload = json.loads(proc.stdout[start:])
        return int(payload["run-id"])
    except (ValueError, KeyError, TypeError) as err:
        raise DeploymentError(
            f"flwr run failed (exit {proc.returncode}): {proc.stdout[-1500:]} {proc.stderr[-1500:]}"
        ) from err


def follow(
    run_dir: Path,
    rounds: int,
    report: Callable[[RoundProgress], None] | None,
    timeout: float,
    status: Callable[[], str] | None = None,
    status_every: float = 15.0,
    on_poll: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Wait for ``result.json``, reporting each ``progress.jsonl`` line as it appears; a run that
    Flower reports finished without a result (the ServerApp died) fails at once. ``on_poll`` is
    called at every poll (0.2 s): the removals of participants while the run trains."""
    progress = run_dir / "progress.jsonl"
    result = run_dir / "result.json"
    seen = 0
    deadline = time.monotonic() + timeout
    next_status = time.monotonic() + status_every
    while True:
        if progress.exists() and report is not None:
            lines = progress.read_text().split("\n")[:-1]  # complete lines only
            for raw in lines[seen:]:
                d = json.loads(raw)
                report(
                    RoundProgress(
                        int(d["round"]),
                        rounds,
                        int(d["clients_done"]),
                        int(d["clients"]),
                        float(d["epsilon"]),
                        float(d["seconds"]),
                        partial=bool(d.get("partial", False)),
                    )
                )
            seen = len(lines)
        if on_poll is not None:
            on_poll()
        if result.exists():
            data: dict[str, Any] = json.loads(result.read_text())
            if "error" in data:
                raise DeploymentError(f"ServerApp failed: {data['error']}", data)
            return data
        if status is not None and time.monotonic() > next_status:
            next_status = time.monotonic() + status_every
            state = status()
            if state.startswith("finished") and not result.exists():
                time.sleep(1.0)
                if not result.exists():
                    raise DeploymentError(
                        f"Flower run {state} without a result (see `flwr log` and {run_dir})"
                    )
        if time.monotonic() > deadline:
            raise DeploymentError(
                f"run did not finish within {timeout:.0f}s (see `flwr log` and {run_dir})"
            )
        time.sleep(0.2)


def run_app(
    federation: Federation,
    participants: tuple[int, ...],
    config: TrainConfig,
    *,
    run_dir: Path | None = None,
    artifact_dir: Path | None = None,
    noop: bool = False,
    report: Callable[[RoundProgress], None] | None = None,
    timeout: float | None = None,
    policy: VerificationPolicy | None = None,
    quoted_epsilon: float | None = None,
    removed: Callable[[], Collection[tuple[int, int]]] | None = None,
    task: MarketTask | None = None,
) -> dict[str, Any]:
    """One Flower run of the app on ``federation``; the ServerApp's result dict (plus timings).
    ``policy`` overrides the federation's verification policy for this run; ``removed`` names
    the participants (i, j) revoked or departed so far: while the run trains their nodes are
    recorded for the ServerApp and their keys unregistered (:class:`NodePruner`), and the result
    lists them (``removed_nodes``); ``task`` (issue 36) makes the run train that task's
    architecture on each node's ``data-<task>`` folder, evaluated and published as the task's
    (:mod:`mots.training.task_run`); None trains the training config's data set."""
    rd = run_dir if run_dir is not None else federation.workdir / "runs" / uuid.uuid4().hex[:12]
    rd.mkdir(parents=True, exist_ok=True)
    overrides = fm.run_config(
        config,
        participants,
        str(rd.resolve()),
        artifact_dir="" if artifact_dir is None else str(Path(artifact_dir).resolve()),
        noop=noop,
        node_map=federation.node_map(),
        policy=policy or federation.policy,
        quoted_epsilon=quoted_epsilon,
    )
    if task is not None:
        from mots.training.task_run import task_run_config

        overrides.update(task_run_config(task))
    started = time.perf_counter()
    stamps = {"submit": time.time()}
    run_id = submit(federation, overrides, rd)
    stamps["submitted"] = time.time()
    limit = timeout if timeout is not None else 300.0 + 120.0 * config.rounds
    prune = NodePruner(federation, rd, removed) if removed is not None else None
    data = follow(
        rd,
        config.rounds,
        report,
        limit,
        status=lambda: run_status(federation, run_id),
        on_poll=prune,
    )
    stamps["result"] = time.time()
    data["removed_nodes"] = sorted(prune.recorded) if prune is not None else []
    data["wall_seconds"] = time.perf_counter() - started
    log.debug("Flower run %d in %s: %s", run_id, rd, phase_log(stamps, data))
    data["flwr_run_id"] = run_id
    data["run_dir"] = str(rd)
    return data


PHASES = (
    ("submit", "`flwr run` started"),
    ("submitted", "`flwr run` returned the run id"),
    ("process", "the ServerApp's process started"),
    ("loading", "its app module began to load"),
    ("loaded", "its app module loaded"),
    ("main", "its main began"),
    ("connected", "the chosen nodes were connected"),
    ("model_built", "the global model, ε0 and holdout were built"),
    ("rounds_done", "the FedAvg rounds ended"),
    ("outcome", "the outcome was recorded"),
    ("result", "the launcher read result.json"),
)
"""The steps of one Flower run the launcher's debug log times (wall clock; the ServerApp's
stamps come in ``result.json``'s ``phases``)."""


def phase_log(stamps: dict[str, float], data: dict[str, Any]) -> str:
    """Each step of a run at its second from the submit, and the seconds since the step
    before: where a run's time outside its FedAvg rounds goes."""
    at = {**{k: float(v) for k, v in (data.get("phases") or {}).items()}, **stamps}
    t0, prev, parts = at["submit"], at["submit"], []
    for key, what in PHASES:
        if key in at:
            parts.append(f"{what} +{at[key] - t0:.2f}s (Δ{at[key] - prev:.2f})")
            prev = at[key]
    return "; ".join(parts)


def train_on_federation(
    participants: tuple[int, ...],
    config: TrainConfig,
    *,
    federation: Federation | None,
    report: Callable[[RoundProgress], None] | None,
    artifact_dir: Path | None,
    quoted_epsilon: float | None = None,
    removed: Callable[[], Collection[tuple[int, int]]] | None = None,
    task: MarketTask | None = None,
) -> TrainingResult:
    """``train_coalition(..., engine="deployment")``: on ``federation``, or on a temporary
    (authenticated, encrypted) one holding exactly the coalition's clients; ``removed`` as in
    :func:`run_app`, and so is ``task`` (which needs a ``federation`` whose nodes hold
    ``data-<task>`` folders: a temporary one holds none)."""
    if federation is None and task is not None:
        raise ValueError(
            f"federation: task {task.name} trains on nodes holding data-{task.name} folders; "
            "give a LocalFederation(task_data=...) or an external SuperLink"
        )
    if federation is None:
        node_types = [i for i, k in enumerate(participants) for _ in range(k)]
        port = free_port_block(ports_needed(len(node_types)))
        tmp = Path(tempfile.mkdtemp(prefix="mots-fed-"))
        with LocalFederation(
            n_nodes=len(node_types), node_types=node_types, superlink_port=port, workdir=tmp
        ) as fed:
            data = run_app(
                fed,
                participants,
                config,
                artifact_dir=artifact_dir,
                report=report,
                quoted_epsilon=quoted_epsilon,
                removed=removed,
                task=task,
            )
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        data = run_app(
            federation,
            participants,
            config,
            artifact_dir=artifact_dir,
            report=report,
            quoted_epsilon=quoted_epsilon,
            removed=removed,
            task=task,
        )
    return training_result(data, participants, config)


def training_result(
    data: dict[str, Any], participants: tuple[int, ...], config: TrainConfig
) -> TrainingResult:
    """The :class:`TrainingResult` of a ServerApp result; QualityGateError when it may not be
    published."""
    gate = data.get("quality_gate", {})
    if not data.get("published", True):
        raise QualityGateError(
            f"the model is not published: {gate.get('reason', 'quality gate failed')}", data
        )
    eps = float(data["epsilon"])
    return TrainingResult(
        epsilon=eps,
        losses=[float(x) for x in data["losses"]],
        round_seconds=[float(x) for x in data["round_seconds"]],
        artifact_path=Path(data["artifact_path"]) if data.get("artifact_path") else None,
        artifact_sha256=data.get("artifact_sha256"),
        metadata={
            "engine": "deployment",
            "participants": list(participants),
            "completed_participants": [int(x) for x in data["completed_participants"]],
            "participant_status": data["participant_status"],
            "asked_per_round": data.get("asked_per_round", []),
            "removed_nodes": data.get("removed_nodes", []),
            "quality_gate": gate,
            "published": True,
            "flwr_run_id": data["flwr_run_id"],
            "nodes": data["nodes"],
            "train_seconds_max": data["train_seconds_max"],
            "discover_seconds": data["discover_seconds"],
            "seconds": data["wall_seconds"],
            "run_dir": data["run_dir"],
            "policy": data.get("policy", {}),
            "config": config.model_dump(mode="json"),
        },
        accuracy=None if math.isnan(float(data["accuracy"])) else float(data["accuracy"]),
    )
