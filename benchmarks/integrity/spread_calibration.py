"""The calibration of ``rescaled``'s ``min_spread_ratio`` (issue 37; docs/training.md, "Copies and
shirking"): every honest update's first-layer participation ratio over the server's draws'
median, and that of a shadow shirker's update from the same model.

An honest run of ``rounds`` FedAvg rounds (every client honest, all aggregated with the
configuration's weights, uniform by default as in the bench's trials and in
:mod:`benchmarks.integrity.simulate`); for each client of
each round the ratio of its honest update and, from round 1, of E/4 of the steps from the same
model rescaled to the honest norm (:func:`benchmarks.integrity.copy_shirk._shirk`), both against
the round's anchored references for its D_i (:meth:`mots.training.holdout.Holdout.
anchored_references`, as :func:`mots.training.verification.verify_round` builds them). A bound b
flags the honest rows under b; a shirker of a market round of 5 FedAvg rounds is caught when one
of its rounds 1-4 is under b. Run::

    python -m benchmarks.integrity.spread_calibration SEEDS ROUNDS OUT.json [LAYOUT [E]]

e.g. ``0,1,2 12 out.json 3,3,2 20`` (the bench's layout) or ``0,1,2 12 out.json 4,2,2 5`` (the
simulate harness's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.integrity.copy_shirk import _shirk, _update
from mots.training.config import TrainConfig
from mots.training.datasets import load_dataset
from mots.training.fedavg import aggregate, aggregation_weights
from mots.training.holdout import Holdout
from mots.training.local import client_data, torch_threads
from mots.training.models import build_model, get_weights
from mots.training.verification import VerificationPolicy, flatten

FASHION = Path("/usr/share/datasets/fashion-mnist")


def ratios(
    seed: int,
    rounds: int,
    layout: tuple[int, ...] = (3, 3, 2),
    local_steps: int = 20,
) -> list[dict[str, Any]]:
    """One honest run's rows: seed, round, type, client, honest ratio, shadow shirker's ratio."""
    pol = VerificationPolicy()
    cfg = TrainConfig(
        data_dir=FASHION,
        sizes=(50, 120, 300)[: len(layout)],
        counts=layout,
        rounds=rounds,
        seed=seed,
        local_steps=local_steps,
    )
    ds = load_dataset(cfg.dataset, cfg.data_dir)
    ho = Holdout.build(cfg, ds, pol.holdout)
    assert ho is not None, "the holdout needs free training samples"
    clients = [(i, j) for i, k in enumerate(layout) for j in range(k)]
    data = {n: client_data(cfg, i, j, ds) for n, (i, j) in enumerate(clients)}
    net = build_model(cfg.model, ds.input_shape, ds.num_classes)
    w = get_weights(
        build_model(cfg.model, ds.input_shape, ds.num_classes, zero_init=cfg.zero_init, seed=0)
    )
    rows: list[dict[str, Any]] = []
    with torch_threads(1):
        for r in range(rounds):
            refs = {d: ho.anchored_references(w, r, d, pol.anchor_draws) for d in cfg.sizes}
            g = flatten(w)
            sent = {}
            for n, (i, j) in enumerate(clients):
                ref = refs[cfg.sizes[i]]
                med = ref.median_spread or 1.0
                sent[n] = _update(net, w, data[n], cfg, r, None)
                shirk = None
                if r >= 1:
                    shirk = (ref.spread(flatten(_shirk(net, w, data[n], cfg, r)) - g) or 0.0) / med
                honest = (ref.spread(flatten(sent[n]) - g) or 0.0) / med
                rows.append(
                    {"seed": seed, "round": r, "type": i, "client": j, "honest": honest}
                    | {"shirk": shirk}
                )
            keys = sorted(sent)
            sizes = [cfg.sizes[clients[k][0]] for k in keys]
            wts = aggregation_weights(sizes, cfg.aggregation)
            w = aggregate([sent[k] for k in keys], wts)
    return rows


def main(argv: list[str]) -> None:
    """The command line of the module docstring; the rows as JSON in OUT."""
    seeds = [int(s) for s in argv[0].split(",")]
    layout = tuple(int(x) for x in argv[3].split(",")) if len(argv) > 3 else (3, 3, 2)
    steps = int(argv[4]) if len(argv) > 4 else 20
    rows = [r for s in seeds for r in ratios(s, int(argv[1]), layout, steps)]
    Path(argv[2]).write_text(json.dumps(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
