"""The paper's CNN (Section 5): two 5×5 convolutions with ReLU and 2×2 max pooling, three FC
layers; the same network as :func:`mots.training.models.describe_network`'s ``cnn``."""

from __future__ import annotations

from typing import Any

from mots.training.models import describe_network


def describe(input_shape: tuple[int, ...], num_classes: int) -> dict[str, Any]:
    """The CNN for (C, H, W) images of at least 16×16 pixels."""
    if len(input_shape) != 3 or min(input_shape[1:]) < 16:
        raise ValueError(f"cnn needs (C, H, W) images of at least 16x16, got {list(input_shape)}")
    c, h, w = (int(s) for s in input_shape)
    return describe_network("cnn", (c, h, w), num_classes)
