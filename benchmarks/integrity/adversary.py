"""Attacking participants, for tests and ``make bench-integrity`` only.

A dishonest edge node runs whatever program it likes beside its SuperNode; this module is such a
program: a resident trainer (:mod:`mots.training.edge_trainer`'s wire protocol on a Unix socket)
that answers each round with a corrupted update. It lives outside the shipped packages (the edge
and SuperLink images copy ``shared/mots`` and ``edge`` only), and no setting of a production node
selects it: a node that ran it would be refused by the ServerApp's verification, which is what the
tests show. Run: ``python -m benchmarks.integrity.adversary --socket P --attack free_rider``.

Attacks on the update (:data:`ATTACKS`, and :data:`RUN_ATTACKS`):

- ``free_rider``: returns the global model it was sent (no work);
- ``noisy_free_rider``: the global model plus Gaussian noise as large as an honest update;
- ``random_weights``: standard normal weights;
- ``scaled_weights``: an honest update's weights × 50 + 5;
- ``nan_weights``: an honest update with NaN in its first layer;
- ``label_flip``: trains honestly on its data with every label y replaced by (y + 1) mod 10;
- ``garbage_data``: trains honestly (E steps of b) on D uniform-random images with random labels,
  not on data like the declared data;
- ``stale_replay``: resends the weights it sent in the previous round (round 0: honest);
- ``noise_diluted``: half the honest update plus Gaussian noise of the same norm (‖0.5 Δ‖);
- ``lazy_steps``: an honest update of E/4 of the E steps asked (reported as the full work; E/2
  is measured at the unit level, :mod:`benchmarks.integrity.simulate`);
- ``shirk_after_round0`` (issue 37): honest in round 0; from round 1 E/4 of the E steps,
  the update rescaled to the norm of its honest update of that round (the norm checks see an
  honest size);
- ``sybil_twin`` (issue 37): the second account of the owner of participant (type, 0), which
  sends that participant's own update (it trains as (type, 0): the same data and mini-batch
  draws, so the same update; one training, sent twice).

``garbage_data``, ``stale_replay``, ``noise_diluted`` and ``lazy_steps`` are issue 24's, meant to
be mounted by a majority of a round's participants.
"""

from __future__ import annotations

import argparse
import socketserver
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
ATTACKS = (
    "free_rider",
    "noisy_free_rider",
    "random_weights",
    "scaled_weights",
    "nan_weights",
    "label_flip",
    "garbage_data",
    "stale_replay",
    "noise_diluted",
    "lazy_steps",
)
RUN_ATTACKS = ("shirk_after_round0", "sybil_twin")
"""Issue 37's attacks, which depend on the round or on another participant's update (the
resident trainer mounts them, :func:`adversarial_train`; :func:`corrupt`, which
:mod:`benchmarks.integrity.simulate` runs over :data:`ATTACKS`, does not)."""
TRAINED = ("label_flip", "garbage_data", "lazy_steps")
"""Attacks whose update is trained by :func:`_attack_training` (the rest corrupt the honest one)."""
_LAST_SENT: dict[tuple[int, int], list[FloatArray]] = {}
"""stale_replay: the weights this process last sent, per (type, client) index."""


def corrupt(
    attack: str,
    sent: list[FloatArray],
    honest: list[FloatArray],
    flipped: Callable[[], list[FloatArray]],
    rng: np.random.Generator,
) -> list[FloatArray]:
    """The weights ``attack`` replies with, given the model ``sent``, an honest update of it and a
    way to train it on flipped labels."""
    if attack == "free_rider":
        return [np.array(a, dtype=np.float32, copy=True) for a in sent]
    if attack == "noisy_free_rider":
        size = float(
            np.sqrt(sum(float(np.sum((h - s) ** 2)) for h, s in zip(honest, sent, strict=True)))
        )
        noise = [rng.standard_normal(np.shape(a)) for a in sent]
        norm = float(np.sqrt(sum(float(np.sum(n**2)) for n in noise))) or 1.0
        return [(s + n * size / norm).astype(np.float32) for s, n in zip(sent, noise, strict=True)]
    if attack == "random_weights":
        return [rng.standard_normal(np.shape(a)).astype(np.float32) for a in sent]
    if attack == "scaled_weights":
        return [(np.asarray(h) * 50.0 + 5.0).astype(np.float32) for h in honest]
    if attack == "nan_weights":
        out = [np.array(h, dtype=np.float32, copy=True) for h in honest]
        out[0].flat[:: max(1, out[0].size // 10)] = np.nan
        return out
    if attack == "noise_diluted":
        half = [0.5 * (np.asarray(h) - s) for h, s in zip(honest, sent, strict=True)]
        size = float(np.sqrt(sum(float(np.sum(d**2)) for d in half)))
        noise = [rng.standard_normal(np.shape(a)) for a in sent]
        norm = float(np.sqrt(sum(float(np.sum(n**2)) for n in noise))) or 1.0
        return [
            (s + d + n * size / norm).astype(np.float32)
            for s, d, n in zip(sent, half, noise, strict=True)
        ]
    if attack in TRAINED:
        return flipped()
    raise ValueError(f"attack must be one of {', '.join(ATTACKS)}, got {attack!r}")


def _attack_training(
    attack: str, request: dict[str, Any], weights: list[FloatArray]
) -> list[FloatArray]:
    """The local update of ``request`` as ``attack`` makes it: on this node's data with labels
    (y + 1) mod 10 (label_flip), on random images and labels (garbage_data), or E/4 steps."""
    import torch

    from mots.training import datasets
    from mots.training.config import TrainConfig
    from mots.training.fedavg import learning_rate
    from mots.training.local import (
        ClientData,
        batch_indices,
        client_data,
        torch_threads,
        train_local,
    )
    from mots.training.models import build_model, get_weights, set_weights

    cfg = TrainConfig(**request["config"])
    i, j, r = int(request["type_index"]), int(request["client_index"]), int(request["round"])
    ds = datasets.load_dataset(cfg.dataset, cfg.data_dir)
    cd = client_data(cfg, i, j, ds)
    steps = cfg.local_steps
    if attack == "label_flip":
        cd = ClientData(cd.x, (cd.y + 1) % ds.num_classes, cd.pid)
    elif attack == "garbage_data":
        gen = np.random.default_rng([r, j, 0x6A5])
        x = gen.random(tuple(cd.x.shape), dtype=np.float32)
        y = gen.integers(0, ds.num_classes, size=cd.size)
        cd = ClientData(torch.from_numpy(x), torch.from_numpy(y), cd.pid)
    else:  # lazy_steps, shirk_after_round0 (rescaled by the caller)
        steps = max(1, cfg.local_steps // 4)
    model = build_model(cfg.model, ds.input_shape, ds.num_classes)
    with torch_threads(1):
        set_weights(model, weights)
        idx = batch_indices(cfg.seed, r, cd.pid, cd.size, cfg.local_steps, cfg.batch_size)
        train_local(model, cd, idx[:steps], learning_rate(cfg.lr, r))
        return get_weights(model)


def adversarial_train(
    attack: str, request: dict[str, Any], weights: list[FloatArray]
) -> tuple[list[FloatArray], dict[str, Any]]:
    """What the attacking trainer answers: the honest metrics (an attacker reports what the
    server expects) with the corrupted weights."""
    from mots.training.edge_trainer import handle_train

    honest, metrics = handle_train(request, weights)
    rng = np.random.default_rng([int(request["round"]), int(request["client_index"]), 0xBAD])
    if attack == "stale_replay":
        who = (int(request["type_index"]), int(request["client_index"]))
        sent = _LAST_SENT.setdefault(who, honest)
        return [np.array(a, dtype=np.float32, copy=True) for a in sent], metrics
    if attack == "sybil_twin":
        return handle_train({**request, "client_index": 0}, weights)[0], metrics
    if attack == "shirk_after_round0":
        if int(request["round"]) == 0:
            return honest, metrics
        return rescaled(weights, _attack_training(attack, request, weights), honest), metrics
    return corrupt(
        attack, weights, honest, lambda: _attack_training(attack, request, weights), rng
    ), metrics


def rescaled(
    sent: list[FloatArray], lazy: list[FloatArray], honest: list[FloatArray]
) -> list[FloatArray]:
    """``lazy``'s update of ``sent`` stretched to the norm of ``honest``'s (its directions kept)."""

    def norm(w: list[FloatArray]) -> float:
        return float(
            np.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(w, sent, strict=True)))
        )

    scale = norm(honest) / (norm(lazy) or 1.0)
    return [(s + (b - s) * scale).astype(np.float32) for s, b in zip(sent, lazy, strict=True)]


def make_handler(attack: str) -> type[socketserver.BaseRequestHandler]:
    """A request handler of the edge trainer's protocol that corrupts every update."""
    from mots.training import edge_trainer

    class Handler(edge_trainer._Handler):
        def handle(self) -> None:
            sock = self.request
            try:
                header, arrays = edge_trainer.recv_frame(sock)
                if header.get("op") == "train":
                    new, info = adversarial_train(attack, header, arrays)
                    edge_trainer.send_frame(sock, info, new)
                else:
                    edge_trainer.send_frame(sock, {"pid": 0, "uptime": 0.0}, [])
            except Exception as err:
                edge_trainer.send_frame(sock, {"error": f"{type(err).__name__}: {err}"}, [])

    return Handler


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.integrity.adversary --socket PATH --attack NAME``."""
    p = argparse.ArgumentParser(description="an attacking resident trainer (tests only)")
    p.add_argument("--socket", required=True, type=Path)
    p.add_argument("--attack", required=True, choices=(*ATTACKS, *RUN_ATTACKS))
    args = p.parse_args(argv)
    from mots.training import edge_trainer

    edge_trainer.serve(args.socket, handler=make_handler(args.attack))


if __name__ == "__main__":
    main()
