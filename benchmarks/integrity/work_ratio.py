"""The work ratio ‖Δ_i‖ / median_t ‖Δ_t‖ of honest and shirking updates, per declared size D.

The ``too_little_work`` check (:mod:`mots.training.anchored`) compares an update's norm with the
server's own T draws on D fresh anchor samples. An honest participant's own samples are not
fresh after round 0: the global model already carries its earlier updates (its FedAvg share of
them), so on its own data the loss, the gradients and the update are smaller than on fresh data,
and the more so the smaller D (E·b/D local epochs per round). This module measures that, in
process with the edge nodes' local update (:func:`train_local`, as
:mod:`benchmarks.integrity.simulate`): honest participants of a ``layout`` (counts per type; the
first ``honest`` of each type train honestly, the others are attackers caught in round 0 and so
never averaged) train ``rounds`` FedAvg rounds; each round each honest participant's update is
also computed with E/2, E/4 and one of the E steps from the same model, and every ratio is
recorded with the draws' own ratios (their spread); in round 0 also each update's
``fresh_work`` statistic (``NAME_fresh``: the norm ratio weighed by the first layer's
top-direction share, :meth:`mots.training.anchored.References.fresh_work`, the round-0 bound of
too_little_work). ``python -m benchmarks.integrity.work_ratio
SEEDS [ROUNDS] [LAYOUT] [HONEST]`` prints the rows as JSON lines.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from mots.training.config import TrainConfig
from mots.training.datasets import load_dataset
from mots.training.fedavg import aggregate, aggregation_weights, learning_rate
from mots.training.holdout import Holdout
from mots.training.local import batch_indices, client_data, torch_threads, train_local
from mots.training.models import build_model, get_weights, set_weights
from mots.training.verification import VerificationPolicy, flatten

FASHION = "/usr/share/datasets/fashion-mnist"
STEPS = {"honest": 1.0, "E/2": 0.5, "E/4": 0.25, "one_step": 0.0}


def run_seed(
    seed: int, rounds: int, layout: tuple[int, ...], honest: int, local_steps: int = 20
) -> list[dict[str, Any]]:
    """One run: a row per (round, honest participant) with its ratios and the draws' ratios."""
    cfg = TrainConfig(
        data_dir=FASHION,
        sizes=(50, 120, 300)[: len(layout)],
        counts=layout,
        rounds=rounds,
        local_steps=local_steps,
        test_subset=500,
        seed=seed,
    )
    ds = load_dataset(cfg.dataset, cfg.data_dir)
    pol = VerificationPolicy()
    ho = Holdout.build(cfg, ds, pol.holdout)
    assert ho is not None
    clients = [(i, j) for i, k in enumerate(layout) for j in range(min(honest, k))]
    data = {c: client_data(cfg, c[0], c[1], ds) for c in clients}
    net = build_model(cfg.model, ds.input_shape, ds.num_classes, zero_init=cfg.zero_init, seed=seed)
    weights = get_weights(net)
    rows: list[dict[str, Any]] = []
    for r in range(rounds):
        g = flatten(weights)
        refs = {
            d: ho.anchored_references(weights, r, d, pol.anchor_draws)
            for d in sorted({cfg.sizes[i] for i, _ in clients})
        }
        updates = []
        for i, j in clients:
            c = data[(i, j)]
            idx = batch_indices(cfg.seed, r, c.pid, c.size, cfg.local_steps, cfg.batch_size)
            norms = refs[cfg.sizes[i]].reference_norms()
            median = float(np.median(norms))
            row: dict[str, Any] = {
                "seed": seed,
                "round": r,
                "type": i,
                "D": cfg.sizes[i],
                "draws": [float(x) for x in norms / median],
            }
            for name, share in STEPS.items():
                steps = max(1, int(cfg.local_steps * share))
                set_weights(net, weights)
                train_local(net, c, idx[:steps], learning_rate(cfg.lr, r))
                w = get_weights(net)
                row[name] = float(np.linalg.norm(flatten(w) - g)) / median
                if refs[cfg.sizes[i]].fresh:  # round 0: the shape-weighted statistic too
                    row[f"{name}_fresh"] = refs[cfg.sizes[i]].fresh_work(flatten(w) - g)
                if name == "honest":
                    updates.append(w)
            rows.append(row)
        sizes = [cfg.sizes[i] for i, _ in clients]
        weights = aggregate(updates, aggregation_weights(sizes, cfg.aggregation))
    return rows


if __name__ == "__main__":
    seeds = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [0]
    n_rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    lay = tuple(int(x) for x in sys.argv[3].split(",")) if len(sys.argv) > 3 else (1, 1, 1)
    n_honest = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    with torch_threads(1):
        for s in seeds:
            for out in run_seed(s, n_rounds, lay, n_honest):
                print(json.dumps(out), flush=True)
