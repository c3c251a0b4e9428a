"""Who trains in a Flower run and how each fared: the run config, the market's participants, and
their verdicts (verified, dropped, failed verification).

Who is who comes from the run config's node map, which the orchestration (or the local federation)
built from the SuperNode public keys it registered with the SuperLink: Flower assigns each
registered key a node id and admits only requests signed by that key, so a node is the participant
whose key it holds, whatever it says about itself. The first K_i mapped nodes of each type are
chosen (:func:`choose`). A participant that leaves (no reply, an error reply, a failed check) is
left out of the rest of the run; the run fails when fewer than the policy's minimum share remain
(:func:`check_share`). Cross-device sampling (:func:`sampled`) asks, in each FedAvg round, the
participants :func:`mots.training.partition.round_sample` draws among those still active, the
same draw as the in-process engines; every participant is still a participant of the market's K,
paid when it stayed active and every update it was asked for was verified
(:func:`completed_per_type`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mots.training.flower_messages as fm
from mots.training.config import TrainConfig
from mots.training.partition import round_sample
from mots.training.removal import REMOVED_REASON
from mots.training.verification import VerificationPolicy

VERIFIED, DROPPED, FAILED = "verified", "dropped", "failed_verification"


class RunFailedError(RuntimeError):
    """The run cannot go on (too few participants left, no mapped node, a bad run config)."""

    def __init__(self, message: str, participants: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.participants = participants or []


def num(value: Any) -> float:
    """A scalar record value as a number (records are typed as unions of scalars and lists)."""
    if isinstance(value, list | bytes | str):
        raise TypeError(f"expected a number in the record, got {value!r}")
    return float(value)


@dataclass
class Participant:
    """A chosen node, the market participant its key belongs to, and how it fared."""

    node_id: int
    type_index: int
    client_index: int
    status: str = VERIFIED
    rounds_asked: int = 0
    rounds_verified: int = 0
    left_in_round: int | None = None
    reason: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        """Still asked to train (not dropped, not failed)."""
        return self.status == VERIFIED

    def leave(self, status: str, round_index: int | None, reason: str) -> None:
        """Drop the participant from this round and the rest."""
        self.status, self.left_in_round, self.reason = status, round_index, reason


@dataclass
class RunSetup:
    """What the run config says: the training, the coalition, the node map and the rules."""

    cfg: TrainConfig
    participants: list[int]
    node_map: dict[int, tuple[int, int]]
    policy: VerificationPolicy
    quoted_epsilon: float | None
    node_timeout: float
    noop: bool
    out: Path | None
    artifact_dir: Path | None

    @property
    def progress(self) -> Path | None:
        """The progress file the launcher follows."""
        return self.out / "progress.jsonl" if self.out is not None else None


def setup(run_config: Any) -> RunSetup:
    """Parse a Flower run config (ValueError naming the key on bad input)."""
    rc = run_config
    cfg = fm.train_config_from_run(rc)
    quoted = num(rc.get(fm.RUN_QUOTED_EPSILON, 0.0))
    return RunSetup(
        cfg=cfg,
        participants=list(cfg.check_participants(fm.participants_from_run(rc))),
        node_map=fm.node_map_from_run(rc),
        policy=fm.policy_from_run(rc),
        quoted_epsilon=quoted if quoted > 0.0 else None,
        node_timeout=num(rc.get(fm.RUN_NODE_TIMEOUT, 180.0)),
        noop=bool(rc.get(fm.RUN_NOOP, False)),
        out=Path(str(rc[fm.RUN_OUT_DIR])) if rc.get(fm.RUN_OUT_DIR) else None,
        artifact_dir=Path(str(rc[fm.RUN_ARTIFACT_DIR])) if rc.get(fm.RUN_ARTIFACT_DIR) else None,
    )


def choose(setup: RunSetup) -> list[Participant]:
    """The participants: for each type i, the mapped nodes of indices 0..K_i−1 (the orchestration
    maps the round's participants there; a local federation's nodes by their client index). A
    participant without a registered node is recorded as dropped (node id 0)."""
    by_key = {(i, j): node for node, (i, j) in setup.node_map.items()}
    chosen: list[Participant] = []
    for i, k in enumerate(setup.participants):
        for j in range(k):
            node = by_key.get((i, j))
            if node is None:
                missing = Participant(0, i, j)
                missing.leave(DROPPED, None, "no registered SuperNode key")
                chosen.append(missing)
            else:
                chosen.append(Participant(node, i, j))
    return chosen


def participant_rows(chosen: list[Participant]) -> list[dict[str, Any]]:
    """Each participant's outcome as plain JSON values."""
    return [asdict(p) for p in chosen]


def check_share(chosen: list[Participant], policy: VerificationPolicy, when: str) -> None:
    """Fail the run when fewer than ``min_share`` of the chosen participants still in the round
    remain. A participant removed by the market (revoked or departed while the run trains:
    :data:`~mots.training.removal.REMOVED_REASON`) is out of the round's K, as if it had left
    before the close, so it leaves the denominator too; a drop-out or a failed verification
    counts against the share (the in-process engine, which has no share check, publishes with
    the survivors alike)."""
    active = sum(p.active for p in chosen)
    removed = sum(p.reason == REMOVED_REASON for p in chosen)
    need = max(1, math.ceil(policy.min_share * (len(chosen) - removed)))
    if active < need:
        left = {p.node_id: f"{p.status}: {p.reason}" for p in chosen if not p.active}
        raise RunFailedError(
            f"{when}: {active} of {len(chosen)} participants remain, the policy needs {need} "
            f"(min_share {policy.min_share} of the {len(chosen) - removed} not removed); "
            f"left: {left}",
            participant_rows(chosen),
        )


def sampled(chosen: list[Participant], cfg: TrainConfig, r: int) -> list[Participant]:
    """The participants asked to train in FedAvg round ``r``: all the active ones, or with
    cross-device sampling max(⌊A·fraction_train⌋, min_train_clients) of the A active ones
    drawn by ``round_sample`` (the in-process engines' draw over the coalition, in the same
    type-major order, while nobody has left)."""
    active = [p for p in chosen if p.active]
    return [active[int(i)] for i in round_sample(len(active), cfg, r)]


def completed_per_type(chosen: list[Participant], n_types: int) -> list[int]:
    """Per type, the participants still active whose updates were verified in every round they
    were asked (with sampling, one that no round drew counts: it stood ready throughout; without
    it every active participant is asked every round)."""
    out = [0] * n_types
    for p in chosen:
        if p.status == VERIFIED and p.rounds_verified == p.rounds_asked:
            out[p.type_index] += 1
    return out
