"""Multinomial logistic regression (the paper's convex model, Section 5): Flatten, Linear.

For a (1, 28, 28) input this is exactly :func:`mots.training.models.describe_network`'s
``logistic`` (state_dict keys ``linear.weight``, ``linear.bias``), so Fashion-MNIST's task trains
the model the platform sells today.
"""

from __future__ import annotations

from typing import Any

from mots.tasks.architectures import flat_size, layer


def describe(input_shape: tuple[int, ...], num_classes: int) -> dict[str, Any]:
    """softmax(W x + b) on the flattened input."""
    return {
        "type": "Sequential",
        "layers": [
            layer("flatten", "Flatten"),
            layer("linear", "Linear", in_features=flat_size(input_shape), out_features=num_classes),
        ],
    }
