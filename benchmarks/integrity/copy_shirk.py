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
:func:`run` adds the same two attacks on a real local federation
(:mod:`benchmarks.integrity.federation_copy_shirk`). ``sybil_twin`` must be caught in every
try; ``shirk_after_round0``, whose detection is a measured rate, must be deterred
(:func:`deterrence`: its payoff, bonds slashed included, below the honest participant's).
Neither row touches a database (the verdicts are the ServerApp's; the market books what the
settlement names, and the bond's hold, slash and refund are tested on SQLite and PostgreSQL in
``tests/services/market/test_participation_bond.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.integrity.federation import Outcome
from benchmarks.integrity.federation_copy_shirk import HONEST, copy_shirk_federation
from benchmarks.integrity.suite import SuiteResult
from mots.economics.bond import bond_factor
from mots.platform.settings.rounds import Bond
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
SHIRK_SEEDS = 6
"""In-process tries of ``shirk_after_round0`` at least (its detection rate is measured)."""
MEASURED_Q = 2 / 18
"""q of the row's bond: the share of market rounds (5 FedAvg rounds, shirking in rounds 1-4) in
which ``rescaled`` at the shipped ``min_spread_ratio`` 0.35 caught the rescaled E/4 shirker of the
row's type (D = 120), measured on other seeds than the row's (docs/training.md, "Copies and
shirking": 2 of 18 runs, seeds 6-11, layout (3, 3, 2), E = 20)."""
TWIN = 1000
"""The twin account's key (the original is participant (0, 0), key 0)."""


@dataclass
class Trial:
    """One run's outcome: the attacking accounts' verdicts, the honest ones' counts."""

    attack: str
    seed: int
    attackers: dict[int, str] = field(default_factory=dict)
    """key → "verified" or the check that failed it (and in which round)."""
    honest_participants: int = 0
    honest_rounds: int = 0
    honest_flagged: int = 0
    honest_failures: list[str] = field(default_factory=list)
    """Each flagged honest participant-round: "key: check (round r)"."""
    honest_copy_distance: float = float("inf")
    """The least nearest-update distance of an honest update (how close honest ones came)."""
    spreads: list[tuple[int, int, float]] = field(default_factory=list)
    """(round, key, ratio) of every update that reached ``rescaled``: the first layer's
    participation ratio over the server's draws' median (recorded whatever the bound, so one
    run measures every bound; only when ``min_spread_ratio`` > 0, which computes it)."""

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
    trial.honest_participants = len(active) - len(attackers)
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
                if "spread_ratio" in v.stats:
                    trial.spreads.append((r, v.key, float(v.stats["spread_ratio"])))
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


def deterrence(
    tries: int,
    detections: int,
    honest_tries: int,
    honest_flagged: int,
    bond_rate: float,
    work_fraction: float,
) -> dict[str, Any]:
    """Whether the bond deters the shirker, from the tries' measured detections: the payoff sums
    (Eq. 6b, docs/mechanisms.md §7.4) of the shirker and of the honest participants, in units of
    the shirker's C_i, for the joiner the bond is sized for (U(ε) + r_i = C_i, the marginal one:
    a larger U + r loses more when caught). The quote's bond is B_i = ``bond_factor(q, φ)``·C_i
    with q = ``bond_rate`` (the deployment's ``MOTS_BOND_DETECTION_RATE``). A shirker missed gets
    U + r_i − φ·C_i = (1 − φ)·C_i; one caught does φ·C_i of work and forfeits r_i, the model and
    B_i: −(φ + B_i/C_i)·C_i. An honest participant gets U − C_i + r_i = 0, or −(1 + B_i/C_i)·C_i
    when verification flags it (its bond is slashed too). Deterred when the shirker's mean payoff
    per try is below the honest participant's; for q < 1 − φ that is the measured rate above q."""
    factor = bond_factor(bond_rate, work_fraction)
    shirk = (tries - detections) * (1.0 - work_fraction) - detections * (work_fraction + factor)
    honest = -honest_flagged * (1.0 + factor)
    shirk_mean = shirk / max(1, tries)
    honest_mean = honest / max(1, honest_tries)
    return {
        "detection_rate": detections / max(1, tries),
        "bond_detection_rate": bond_rate,
        "work_fraction": work_fraction,
        "bond_over_cost": factor,
        "shirk_payoff_sum": shirk,
        "honest_payoff_sum": honest,
        "honest_tries": honest_tries,
        "shirk_payoff_mean": shirk_mean,
        "honest_payoff_mean": honest_mean,
        "deterred": tries >= 2 and shirk_mean < honest_mean,
    }


def row_bond() -> Bond:
    """The bond the row's quote carries: ``MOTS_BOND_DETECTION_RATE`` and
    ``MOTS_BOND_WORK_FRACTION`` from the environment when set, else q = :data:`MEASURED_Q`
    (measured apart from the row's tries, so the row tests it) and the shipped φ."""
    env = {
        k: os.environ[f"MOTS_{k.upper()}"]
        for k in ("bond_detection_rate", "bond_work_fraction")
        if f"MOTS_{k.upper()}" in os.environ
    }
    return Bond.model_validate({"bond_detection_rate": MEASURED_Q, **env})


def _as_dicts(trials: list[Trial]) -> list[dict[str, Any]]:
    return [
        {
            "seed": t.seed,
            "attackers": t.attackers,
            "honest_rounds": t.honest_rounds,
            "honest_flagged": t.honest_flagged,
            "honest_failures": t.honest_failures,
            "honest_least_copy_distance": t.honest_copy_distance,
            "attacker_spread_ratios": [
                (r, round(v, 3)) for r, k, v in t.spreads if k in t.attackers
            ],
            "honest_least_spread_ratio": min(
                (v for _, k, v in t.spreads if k not in t.attackers), default=None
            ),
        }
        for t in trials
    ]


def run(workdir: Path, options: dict[str, Any]) -> SuiteResult:
    """``make bench-integrity``'s rows sybil_twin and shirk_after_round0 with the shipped
    verification policy: in process once per seed (``sybil_twin`` at least two seeds,
    ``shirk_after_round0`` at least :data:`SHIRK_SEEDS`, its detection being a measured rate),
    then on a real local federation (:mod:`benchmarks.integrity.federation_copy_shirk`) for
    ``federation_seeds`` (default 0 and 1; [] skips) under ``workdir``. ``sybil_twin`` is met when
    caught in every try; ``shirk_after_round0`` when :func:`deterrence` says deterred."""
    seeds = list(options.get("seeds", [0, 1, 2]))
    seeds = seeds if len(seeds) >= 2 else [*seeds, max(seeds, default=0) + 1]
    shirk_seeds = [*seeds, *range(max(seeds) + 1, max(seeds) + 1 + SHIRK_SEEDS - len(seeds))]
    rounds = max(int(options.get("rounds", 3)), 5)
    fed_seeds = list(options.get("federation_seeds", [0, 1]))
    result = SuiteResult("copy_shirk")
    ds = load_dataset(TrainConfig().dataset, TrainConfig().data_dir)
    fed = Outcome()
    fed_runs = []
    for s in fed_seeds:
        out, extra = copy_shirk_federation(workdir / f"federation-{s}", rounds=rounds, seed=s)
        fed.merge(out)
        fed_runs.append(extra)
    for attack in ATTACKS:
        runs = shirk_seeds if attack == "shirk_after_round0" else seeds
        trials = [run_trial(attack, s, rounds=rounds, dataset=ds) for s in runs]
        f = fed.attacks.get(attack)
        tried = len(trials) + (f.tried if f else 0)
        caught = sum(t.caught for t in trials) + (f.refused_or_caught if f else 0)
        row: dict[str, Any] = {
            "tried": tried,
            "refused_or_caught": caught,
            "paid": str(tried - caught),
        }
        if attack == "shirk_after_round0":
            bond = row_bond()
            honest_tries = sum(t.honest_participants for t in trials)
            flagged = sum(t.honest_flagged for t in trials)
            if f is not None:
                honest_tries += len(HONEST) * f.tried
                flagged += fed.honest_flagged
            row |= {"target": "deterred"} | deterrence(
                tried,
                caught,
                honest_tries,
                flagged,
                bond.bond_detection_rate,
                bond.bond_work_fraction,
            )
        result.attacks[attack] = row
        result.honest_rounds += sum(t.honest_rounds for t in trials)
        result.honest_flagged += sum(t.honest_flagged for t in trials)
        result.extra[attack] = _as_dicts(trials)
    result.honest_rounds += fed.honest_rounds
    result.honest_flagged += fed.honest_flagged
    result.extra["federation"] = fed_runs
    return result
