"""TrainConfig: defaults, presets, and rejections that name the field and the rule."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mots.training.config import TrainConfig


def test_defaults_are_the_measurable_setting() -> None:
    """Logistic, uniform FedAvg, η0 = 0.5, R = 100, E = 20, b = 32 on D = (50, 120, 300), N = (10, 5, 5)."""
    c = TrainConfig()
    assert (c.model, c.aggregation, c.lr, c.rounds, c.local_steps, c.batch_size) == (
        "logistic",
        "uniform",
        0.5,
        100,
        20,
        32,
    )
    assert c.sizes == (50, 120, 300) and c.type_counts == (10, 5, 5)
    assert c.type_classes == (1, 5, 10)


def test_paper_presets_one_call_away() -> None:
    """The paper's MNIST (η0 = 0.001, R = 500) and CIFAR-10 (CNN, label skew) values."""
    m = TrainConfig.paper_mnist()
    assert (m.lr, m.rounds, m.local_steps, m.batch_size, m.zero_init) == (0.001, 500, 20, 32, True)
    c = TrainConfig.paper_cifar10(dataset="fashion-mnist")
    assert (c.model, c.partition, c.sizes, c.lr, c.local_steps, c.rounds) == (
        "cnn",
        "label_skew",
        (1000, 2250, 5750),
        0.1,
        30,
        600,
    )


def test_float_sizes_accepted_when_whole() -> None:
    """Scenario files carry D_i as floats: 50.0 is 50, 50.5 is refused naming sizes[0]."""
    assert TrainConfig(sizes=[50.0, 120.0, 300.0]).sizes == (50, 120, 300)
    with pytest.raises(ValidationError, match=r"sizes\[0\]"):
        TrainConfig(sizes=[50.5, 120, 300])


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"lr": 0}, "lr"),
        ({"rounds": 0}, "rounds"),
        ({"counts": [1, 2]}, "counts"),
        ({"classes_per_type": [1, 5, 11]}, "classes_per_type"),
        ({"aggregation": "median"}, "aggregation"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_rejections_name_the_field(kwargs: dict[str, object], needle: str) -> None:
    """Bad input fails with the field's name in the message."""
    with pytest.raises(ValidationError, match=needle):
        TrainConfig(**kwargs)  # type: ignore[arg-type]


def test_participants_checked_against_types_and_counts() -> None:
    """K must have one entry per type, 0 ≤ K_i ≤ N_i, and not be empty."""
    c = TrainConfig()
    assert c.check_participants([10, 5, 5]) == (10, 5, 5)
    with pytest.raises(ValueError, match=r"participants\[0\] must lie in 0..10"):
        c.check_participants([11, 0, 0])
    with pytest.raises(ValueError, match="one entry per type"):
        c.check_participants([1, 1])
    with pytest.raises(ValueError, match="empty"):
        c.check_participants([0, 0, 0])
