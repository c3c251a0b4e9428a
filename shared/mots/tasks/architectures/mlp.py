"""A multilayer perceptron: Flatten, then ``hidden`` units with ReLU per hidden layer, then the
output layer. Small inputs (8×8 digits, tabular rows) train in seconds on a CPU."""

from __future__ import annotations

from typing import Any

from mots.tasks.architectures import flat_size, layer


def describe(
    input_shape: tuple[int, ...], num_classes: int, hidden: tuple[int, ...] | list[int] = (32,)
) -> dict[str, Any]:
    """Flatten → (Linear → ReLU) per entry of ``hidden`` → Linear to the classes."""
    if not hidden or any(int(h) < 1 for h in hidden):
        raise ValueError(f"mlp: hidden must list layer widths ≥ 1, got {list(hidden)}")
    layers = [layer("flatten", "Flatten")]
    width = flat_size(input_shape)
    for k, h in enumerate(hidden):
        layers.append(layer(f"fc{k}", "Linear", in_features=width, out_features=int(h)))
        layers.append(layer(f"relu{k}", "ReLU"))
        width = int(h)
    layers.append(layer("out", "Linear", in_features=width, out_features=num_classes))
    return {"type": "Sequential", "layers": layers}
