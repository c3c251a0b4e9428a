"""The orchestration's training settings reach the training engine's configuration."""

from __future__ import annotations

import pytest

from services.orchestration.core.config import Settings
from services.orchestration.trainer import Trainer


def test_cross_device_sampling_settings_reach_the_train_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MOTS_TRAIN_FRACTION and MOTS_TRAIN_MIN_CLIENTS set FedAvg's per-round sample; by
    default every participant trains every round."""
    assert Trainer(Settings())._config([8, 16], [0, 0, 1]).fraction_train == 1.0
    monkeypatch.setenv("MOTS_TRAIN_FRACTION", "0.25")
    monkeypatch.setenv("MOTS_TRAIN_MIN_CLIENTS", "3")
    config = Trainer(Settings())._config([8, 16], [0, 0, 1])
    assert (config.fraction_train, config.min_train_clients) == (0.25, 3)
    assert config.counts == (2, 1)
    monkeypatch.setenv("MOTS_TRAIN_FRACTION", "1.5")
    with pytest.raises(ValueError, match="train_fraction"):
        Settings()
