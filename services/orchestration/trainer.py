"""Training a round's coalition with Flower, through the training package's runner.

With ``MOTS_SUPERLINK_ADDRESS`` set, training runs on that external SuperLink (the deployed one,
whose SuperNodes are the edge devices). Otherwise the orchestration worker keeps one local
federation (a Flower SuperLink and one SuperNode per registered client, tagged with its type).
Either way it hands the market's social state K per type to
``mots.training.runner.train_coalition``, which trains exactly those participants.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mots.training.progress import RoundProgress
from services.orchestration.core.config import Settings


@dataclass(frozen=True)
class TrainingOutcome:
    """What a round's training produced; ``completed`` counts the participants per type that finished."""

    epsilon: float
    losses: list[float]
    round_seconds: list[float]
    artifact_path: str
    artifact_sha256: str
    completed: list[int]
    seconds: float
    metadata: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values."""
        return asdict(self)


class Trainer:
    """Runs ``train_coalition`` on the deployment engine (an external SuperLink or a live local
    federation) or in process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._federation: Any = None
        self._node_types: list[int] | None = None
        self._lock = threading.Lock()

    def _config(self, sizes: list[float], node_types: list[int]) -> Any:
        from mots.training.config import TrainConfig

        s = self.settings
        return TrainConfig(
            sizes=tuple(int(d) for d in sizes),
            counts=tuple(node_types.count(i) for i in range(len(sizes))),
            rounds=s.train_rounds,
            local_steps=s.train_local_steps,
            batch_size=s.train_batch_size,
            lr=s.train_lr,
            test_subset=s.train_test_subset,
        )

    def _ensure_federation(self, node_types: list[int]) -> Any:
        """The external SuperLink if one is configured; else a running local federation whose
        nodes match the population's types (restarted if not)."""
        from mots.training.federation import ExternalSuperLink, LocalFederation

        address = self.settings.superlink_address
        if address:
            if not isinstance(self._federation, ExternalSuperLink):
                self.stop()
                self._federation = ExternalSuperLink(
                    address, Path(self.settings.work_dir)
                ).connect()
            return self._federation
        if self._federation is not None and self._node_types == node_types:
            return self._federation
        self.stop()
        fed = LocalFederation(
            n_nodes=len(node_types),
            node_types=node_types,
            superlink_port=self.settings.superlink_port,
            workdir=Path(self.settings.work_dir),
        )
        fed.start()
        self._federation, self._node_types = fed, node_types
        return fed

    def train(
        self,
        participants: list[int],
        sizes: list[float],
        node_types: list[int],
        round_id: int,
        progress: Callable[[RoundProgress], None] | None = None,
    ) -> TrainingOutcome:
        """Train the coalition K (participants per type) and save the model artifact;
        ``progress`` hears of every FedAvg round (and clients finishing within one)."""
        from mots.training.runner import train_coalition

        with self._lock:
            config = self._config(sizes, node_types)
            artifact_dir = Path(self.settings.artifact_dir) / f"round-{round_id}"
            start = time.perf_counter()
            engine = self.settings.trainer
            result = train_coalition(
                participants,
                config,
                engine=engine,
                federation=self._ensure_federation(node_types) if engine == "deployment" else None,
                artifact_dir=artifact_dir,
                progress=progress or False,
            )
            seconds = time.perf_counter() - start
        completed = result.metadata.get("completed_participants", participants)
        return TrainingOutcome(
            epsilon=float(result.epsilon),
            losses=[float(x) for x in result.losses],
            round_seconds=[float(x) for x in result.round_seconds],
            artifact_path=str(result.artifact_path),
            artifact_sha256=str(result.artifact_sha256),
            completed=[int(x) for x in completed],
            seconds=seconds,
            metadata={k: v for k, v in result.metadata.items() if _jsonable(v)},
        )

    def stop(self) -> None:
        """Stop the local federation, if one runs (an external SuperLink is left alone)."""
        if self._federation is not None:
            self._federation.stop()
        self._federation, self._node_types = None, None


def _jsonable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | list | dict) or value is None
