"""Update verification at the unit level: honest and attacking updates computed in process.

Trains a coalition with the same local update the edge nodes run (:func:`train_local`) and, each
round, adds the updates the attacks of :mod:`benchmarks.integrity.adversary` would send; every
round's candidates (and a lazy participant that took one step of E) go through :func:`mots.training.verification.verify_round` as the ServerApp
calls it (the server's holdout gives the reference update and the validation loss), and the
global model moves by the accepted honest updates. Counts, per seed and round, how many honest
updates were flagged (the false-positive rate) and how many attacks were caught.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from benchmarks.integrity.adversary import ATTACKS, corrupt
from mots.training.config import TrainConfig
from mots.training.datasets import Dataset, load_dataset
from mots.training.fedavg import aggregate, learning_rate
from mots.training.holdout import Holdout
from mots.training.local import ClientData, batch_indices, client_data, torch_threads, train_local
from mots.training.models import build_model, get_weights, set_weights
from mots.training.verification import Candidate, VerificationPolicy, flatten, verify_round

FloatArray = Any


@dataclass
class UnitOutcome:
    """What the unit-level runs measured."""

    honest_updates: int = 0
    honest_flagged: int = 0
    flagged_checks: Counter[str] = field(default_factory=Counter)
    attacks: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def false_positive_rate(self) -> float:
        """Flagged honest updates over all honest updates."""
        return self.honest_flagged / max(1, self.honest_updates)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "honest_updates": self.honest_updates,
            "honest_flagged": self.honest_flagged,
            "false_positive_rate": self.false_positive_rate,
            "flagged_checks": dict(self.flagged_checks),
            "attacks": self.attacks,
        }


def _local(
    model: Any,
    weights: list[FloatArray],
    data: ClientData,
    cfg: TrainConfig,
    r: int,
    steps: int | None = None,
) -> list[FloatArray]:
    set_weights(model, weights)
    idx = batch_indices(cfg.seed, r, data.pid, data.size, cfg.local_steps, cfg.batch_size)
    train_local(model, data, idx[:steps], learning_rate(cfg.lr, r))
    return get_weights(model)


def _attack_candidates(
    cands: list[Candidate],
    attacks: tuple[str, ...],
    model: Any,
    weights: list[FloatArray],
    honest: dict[int, list[FloatArray]],
    data: dict[tuple[int, int], ClientData],
    victim: tuple[int, int],
    cfg: TrainConfig,
    r: int,
    prev: list[FloatArray] | None,
) -> dict[int, str]:
    """Append the round's attacking candidates (each built from the victim's data and its honest
    update); their keys and attack names. A lazy participant takes 1, E/4 and E/2 of the E steps."""
    vd = data[victim]
    d = cfg.sizes[victim[0]]
    mine = honest[list(data).index(victim)]
    bad: dict[int, str] = {}

    def add(key: int, name: str, sent: list[FloatArray]) -> None:
        bad[key] = name
        cands.append(Candidate(key, sent, d, cfg.local_steps * cfg.batch_size, d))

    for a, name in enumerate(attacks):
        rng = np.random.default_rng([cfg.seed, r, a])
        if name in ("label_flip", "garbage_data"):
            gen = np.random.default_rng([cfg.seed, r, 0x6A5])
            fake = (
                ClientData(vd.x, (vd.y + 1) % 10, vd.pid)
                if name == "label_flip"
                else ClientData(
                    torch.from_numpy(gen.random(tuple(vd.x.shape), dtype=np.float32)),
                    torch.from_numpy(gen.integers(0, 10, size=vd.size)),
                    vd.pid,
                )
            )
            add(1000 + a, name, _local(model, weights, fake, cfg, r))
        elif name == "stale_replay":
            if prev is not None:
                add(1000 + a, name, prev)
        elif name == "lazy_steps":
            add(
                1000 + a,
                "lazy_steps(E/2)",
                _local(model, weights, vd, cfg, r, cfg.local_steps // 2),
            )
        else:
            add(1000 + a, name, corrupt(name, weights, mine, lambda: mine, rng))
    add(997, "lazy_steps(E/4)", _local(model, weights, vd, cfg, r, max(1, cfg.local_steps // 4)))
    add(999, "one_step_of_E", _local(model, weights, vd, cfg, r, steps=1))
    return bad


def run_seed(
    cfg: TrainConfig,
    participants: tuple[int, ...],
    policy: VerificationPolicy,
    out: UnitOutcome,
    dataset: Dataset,
    attacks: tuple[str, ...] = tuple(ATTACKS),
) -> None:
    """One training run of ``cfg.rounds`` rounds; adds its counts to ``out``."""
    clients = [(i, j) for i, k in enumerate(participants) for j in range(k)]
    data = {c: client_data(cfg, c[0], c[1], dataset) for c in clients}
    holdout = Holdout.build(cfg, dataset, policy.holdout)
    model = build_model(cfg.model, dataset.input_shape, dataset.num_classes)
    weights = get_weights(
        build_model(
            cfg.model, dataset.input_shape, dataset.num_classes, zero_init=cfg.zero_init, seed=0
        )
    )
    expected = cfg.local_steps * cfg.batch_size
    history: list[tuple[Any, Any]] = []
    prev: list[FloatArray] | None = None
    for r in range(cfg.rounds):
        honest = {n: _local(model, weights, data[c], cfg, r) for n, c in enumerate(clients)}
        cands = [
            Candidate(n, w, cfg.sizes[clients[n][0]], expected, cfg.sizes[clients[n][0]])
            for n, w in honest.items()
        ]
        victim = clients[r % len(clients)]
        bad = _attack_candidates(cands, attacks, model, weights, honest, data, victim, cfg, r, prev)
        refs = (
            {
                d: holdout.anchored_references(weights, r, d, policy.anchor_draws)
                for d in sorted(set(cfg.sizes))
            }
            if holdout and policy.anchor_draws > 0
            else None
        )
        res = verify_round(
            weights,
            cands,
            policy,
            reference_update=holdout.reference_update(weights, r) if holdout else None,
            validation_loss=holdout.loss if holdout else None,
            validation_accuracy=holdout.accuracy if holdout else None,
            expected_samples=expected,
            reference_losses=holdout.reference_losses(weights, r, policy.reference_draws)
            if holdout and policy.harm_check == "reference"
            else (),
            anchored=refs,
            history=history,
        )
        g = flatten(weights)
        for c in cands:
            if np.all(np.isfinite(flatten(c.weights))):
                history.append((flatten(c.weights), flatten(c.weights) - g))
        prev = honest[r % len(clients)]
        for v in res.verdicts:
            if v.key in bad:
                row = out.attacks.setdefault(bad[v.key], {"tried": 0, "caught": 0})
                row["tried"] += 1
                row["caught"] += int(not v.accepted)
            else:
                out.honest_updates += 1
                if not v.accepted:
                    out.honest_flagged += 1
                    out.flagged_checks[str(v.check)] += 1
        kept = [honest[k] for k in res.accepted if k in honest] or list(honest.values())
        weights = aggregate(kept, [1.0 / len(kept)] * len(kept))


def measure(
    seeds: list[int],
    *,
    rounds: int = 20,
    participants: tuple[int, ...] = (4, 2, 2),
    policy: VerificationPolicy | None = None,
    **config: Any,
) -> UnitOutcome:
    """Honest false positives and attacks caught over ``seeds`` (one training run each)."""
    pol = policy or VerificationPolicy()
    out = UnitOutcome()
    base = TrainConfig(rounds=rounds, **config)
    dataset = load_dataset(base.dataset, base.data_dir)
    with torch_threads(1):
        for seed in seeds:
            run_seed(base.model_copy(update={"seed": seed}), participants, pol, out, dataset)
    return out


if __name__ == "__main__":
    import json
    import sys

    seeds = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "0,1,2").split(",")]
    print(json.dumps(measure(seeds).as_dict(), indent=1))
