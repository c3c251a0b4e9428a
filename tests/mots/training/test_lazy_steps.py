"""Issue 24, ``lazy_steps``: an update of E/4 of the E steps asked, at declared size D = 50, is
caught by the anchored too_little_work check in round 0 (the model carries no participant's data
yet, so the server's draws are the honest distribution itself), and the honest update of the same
participant from the same model passes. Real Fashion-MNIST, the edge nodes' local update."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mots.training.anchored import judge
from mots.training.config import TrainConfig
from mots.training.datasets import load_dataset
from mots.training.fedavg import learning_rate
from mots.training.holdout import Holdout
from mots.training.local import batch_indices, client_data, torch_threads, train_local
from mots.training.models import build_model, get_weights, set_weights
from mots.training.verification import VerificationPolicy, flatten

pytestmark = [pytest.mark.slow]  # real training: 3 holdouts and 8 server draws each


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quarter_of_the_steps_is_caught_in_round_zero(fashion_dir: Path, seed: int) -> None:
    """E/4 of E = 20 steps (the bench's ``lazy_steps``) fails too_little_work in round 0 for
    each D = 50 participant of the seed; E steps pass every anchored check."""
    cfg = TrainConfig(
        data_dir=fashion_dir, sizes=(50, 120, 300), counts=(3, 3, 2), local_steps=20, seed=seed
    )
    ds = load_dataset(cfg.dataset, cfg.data_dir)
    pol = VerificationPolicy()
    ho = Holdout.build(cfg, ds, pol.holdout)
    assert ho is not None
    net = build_model(cfg.model, ds.input_shape, ds.num_classes, zero_init=True, seed=seed)
    w0 = get_weights(net)
    g = flatten(w0)
    refs = ho.anchored_references(w0, 0, 50, pol.anchor_draws)
    with torch_threads(1):
        for j in range(3):
            c = client_data(cfg, 0, j, ds)
            idx = batch_indices(cfg.seed, 0, c.pid, c.size, cfg.local_steps, cfg.batch_size)
            verdicts = {}
            for name, steps in (("lazy", 5), ("honest", 20)):
                set_weights(net, w0)
                train_local(net, c, idx[:steps], learning_rate(cfg.lr, 0))
                d = flatten(get_weights(net)) - g
                verdicts[name] = judge(d, g, refs)
            assert verdicts["lazy"].check == "too_little_work", verdicts["lazy"].stats
            assert verdicts["honest"].check is None, verdicts["honest"].stats
            assert np.isfinite(verdicts["honest"].stats["work_ratio"])
