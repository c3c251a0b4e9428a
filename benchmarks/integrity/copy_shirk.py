"""Copying and shirking that must not pay (issue 37): a Sybil twin and a shirker from round 1 on.

In process, with the edge nodes' local update (:func:`mots.training.local.train_local`, as
:mod:`benchmarks.integrity.simulate`): a coalition of ``layout`` participants (D = 50/120/300)
trains FedAvg rounds; every round's replies go through
:func:`mots.training.verification.verify_round` as the ServerApp calls it (the server's holdout:
reference update, validation loss and accuracy, anchored draws, the replay history). A
participant whose update fails leaves (it is not asked again, as in
:class:`mots.training.strategy.VerifyingFedAvg`), and is paid only when verified in every round
it was asked (all or nothing, docs/training.md). The attacks:

- ``sybil_twin``: the owner of participant (0, 0) also holds a second account of the same type,
  which sends a copy of (0, 0)'s update every round (one training paid twice);
- ``shirk_after_round0``: participant (1, 0) trains honestly in round 0, then takes E/4 of the E
  steps and rescales its update to the norm its honest update of that round has (the best an
  attacker can aim at: the norm checks then see an honest size). The anchored check
  ``rescaled`` (the first layer's participation ratio against the server's draws) catches it at
  a measured per-round rate (docs/training.md, "Copies and shirking"); the participation bond
  (:mod:`mots.economics.bond`) prices the runs it misses.

A trial is one run (one seed); caught when every attacking account failed verification in some
round, so none is paid. Every other participant is honest; their flagged rounds are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.integrity.suite import SuiteResult
from mots.training.config import TrainConfig
from mots.training.datasets import Dataset, load_dataset
from mots.training.fedavg import aggregate, aggregation_weights, learning_rate
from mots.training.holdout import Holdout
from mots.training.local import ClientData, batch_indices, client_data, torch_threads, train_local
from mots.training.models import build_model, get_weights, set_weights
from mots.training.verification import (
    Candidate,
    RoundVerification,
    VerificationPolicy,
    flatten,
    verify_round,
)

ATTACKS = ("sybil_twin", "shirk_after_round0")
TWIN = 1000
"""The twin account's key (the original is participant (0, 0), key 0)."""


@dataclass
class Trial:
    """One run's outcome: the attacking accounts' verdicts, the honest ones' counts."""

    attack: str
    seed: int
    attackers: dict[int, str] = field(default_factory=dict)
    """key → "verified" or the check that failed it (and in which round)."""
    honest_rounds: int = 0
    honest_flagged: int = 0
    honest_failures: list[str] = field(default_factory=list)
    """Each flagged honest participant-round: "key: check (round r)"."""
    honest_copy_distance: float = float("inf")
    """The least nearest-update distance of an honest update (how close honest ones came)."""

    @property
    def caught(self) -> bool:
        """Every attacking account failed verification, so none is paid."""
        return all(v != "verified" for v in self.attackers.values())

    @property
    def paid(self) -> int:
        """Attacking accounts paid r_i (verified in every round they were asked)."""
        return sum(v == "verified" for v in self.attackers.values())


def _update(
    net: Any, w: list[Any], c: ClientData, cfg: TrainConfig, r: int, steps: int | None
) -> list[Any]:
    set_weights(net, w)
    idx = batch_indices(cfg.seed, r, c.pid, c.size, cfg.local_steps, cfg.batch_size)
    train_local(net, c, idx[:steps], learning_rate(cfg.lr, r))
    return get_weights(net)


def _shirk(net: Any, w: list[Any], c: ClientData, cfg: TrainConfig, r: int) -> list[Any]:
    """E/4 of the steps, the update rescaled to the norm of this round's honest update."""
    g = flatten(w)
    honest = np.linalg.norm(flatten(_update(net, w, c, cfg, r, None)) - g)
    lazy = _update(net, w, c, cfg, r, max(1, cfg.local_steps // 4))
    size = float(np.linalg.norm(flatten(lazy) - g)) or 1.0
    return [(a + (b - a) * honest / size).astype(np.float32) for a, b in zip(w, lazy, strict=True)]


def _verify(
    w: list[Any],
    cands: list[Candidate],
    ho: Holdout,
    cfg: TrainConfig,
    r: int,
    history: list[Any],
    policy: VerificationPolicy,
) -> RoundVerification:
    """:func:`verify_round` with the server's references, as the ServerApp calls it."""
    sizes = sorted({c.declared_size for c in cands})
    return verify_round(
        w,
        cands,
        policy,
        reference_update=ho.reference_update(w, r),
        validation_loss=ho.loss,
        validation_accuracy=ho.accuracy,
        expected_samples=cfg.local_steps * cfg.batch_size,
        reference_losses=ho.reference_losses(w, r, policy.reference_draws),
        anchored={d: ho.anchored_references(w, r, d, policy.anchor_draws) for d in sizes},
        history=history,
    )


def run_trial(
    attack: str,
    seed: int,
    *,
    rounds: int = 5,
    layout: tuple[int, ...] = (3, 3, 2),
    policy: VerificationPolicy | None = None,
    dataset: Dataset | None = None,
    data_dir: Path | None = None,
) -> Trial:
    """One run of ``rounds`` FedAvg rounds with ``attack`` mounted; its :class:`Trial`."""
    if attack not in ATTACKS:
        raise ValueError(f"attack must be one of {', '.join(ATTACKS)}, got {attack!r}")
    pol = policy or VerificationPolicy()
    cfg = TrainConfig(
        data_dir=data_dir,
        sizes=(50, 120, 300)[: len(layout)],
        counts=layout,
        rounds=rounds,
        seed=seed,
    )
    ds = dataset or load_dataset(cfg.dataset, cfg.data_dir)
    ho = Holdout.build(cfg, ds, pol.holdout)
    assert ho is not None, "the holdout needs free training samples"
    clients = [(i, j) for i, k in enumerate(layout) for j in range(k)]
    data = {n: client_data(cfg, i, j, ds) for n, (i, j) in enumerate(clients)}
    types = {n: i for n, (i, _) in enumerate(clients)}
    attackers = [0, TWIN] if attack == "sybil_twin" else [clients.index((1, 0))]
    if attack == "sybil_twin":
        types[TWIN] = 0
    net = build_model(cfg.model, ds.input_shape, ds.num_classes)
    w = get_weights(
        build_model(cfg.model, ds.input_shape, ds.num_classes, zero_init=cfg.zero_init, seed=0)
    )
    trial = Trial(attack, seed, {k: "verified" for k in attackers})
    active = set(types)
    history: list[Any] = []
    expected = cfg.local_steps * cfg.batch_size
    with torch_threads(1):
        for r in range(rounds):
            sent: dict[int, list[Any]] = {}
            for k in sorted(active - {TWIN}):
                shirking = attack == "shirk_after_round0" and k in attackers and r >= 1
                sent[k] = (
                    _shirk(net, w, data[k], cfg, r)
                    if shirking
                    else _update(net, w, data[k], cfg, r, None)
                )
            if TWIN in active:
                sent[TWIN] = [np.array(a, copy=True) for a in sent[0]]
            d = {k: cfg.sizes[types[k]] for k in sent}
            cands = [Candidate(k, v, d[k], expected, d[k]) for k, v in sent.items()]
            res = _verify(w, cands, ho, cfg, r, history, pol)
            g = flatten(w)
            history.extend((flatten(v), flatten(v) - g) for v in sent.values())
            for v in res.verdicts:
                if v.key in trial.attackers:
                    if not v.accepted:
                        trial.attackers[v.key] = f"{v.check} (round {r})"
                else:
                    trial.honest_rounds += 1
                    trial.honest_flagged += int(not v.accepted)
                    if not v.accepted:
                        trial.honest_failures.append(f"{v.key}: {v.check} (round {r})")
                    near = v.stats.get("copy_distance", float("inf"))
                    trial.honest_copy_distance = min(trial.honest_copy_distance, near)
                if not v.accepted:
                    active.discard(v.key)
            kept = res.accepted
            weights = aggregation_weights([d[k] for k in kept], cfg.aggregation)
            w = aggregate([sent[k] for k in kept], weights)
    return trial


def run(workdir: Path, options: dict[str, Any]) -> SuiteResult:
    """``make bench-integrity``'s rows sybil_twin and shirk_after_round0: each tried once per
    seed (at least two), in process; nothing is written under ``workdir``."""
    seeds = list(options.get("seeds", [0, 1, 2]))
    seeds = seeds if len(seeds) >= 2 else [*seeds, max(seeds, default=0) + 1]
    rounds = max(int(options.get("rounds", 3)), 5)
    result = SuiteResult("copy_shirk")
    ds = load_dataset(TrainConfig().dataset, TrainConfig().data_dir)
    for attack in ATTACKS:
        trials = [run_trial(attack, s, rounds=rounds, dataset=ds) for s in seeds]
        result.attacks[attack] = {
            "tried": len(trials),
            "refused_or_caught": sum(t.caught for t in trials),
            "paid": str(sum(t.paid for t in trials)),
        }
        result.honest_rounds += sum(t.honest_rounds for t in trials)
        result.honest_flagged += sum(t.honest_flagged for t in trials)
        result.extra[attack] = [
            {
                "seed": t.seed,
                "attackers": t.attackers,
                "honest_rounds": t.honest_rounds,
                "honest_flagged": t.honest_flagged,
                "honest_failures": t.honest_failures,
                "honest_least_copy_distance": t.honest_copy_distance,
            }
            for t in trials
        ]
    return result
