"""The paper's models (Section 5): multinomial logistic regression (convex) and the CNN.

The CNN has two convolutional layers with ReLU, max pooling after each, and three fully connected
layers. ``zero_init`` sets w0 = 0 as the paper does; for the CNN this leaves every hidden unit
identical (zero gradients below the last layer), so it is offered but not the CNN's default.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

FloatArray = npt.NDArray[np.float32]


class LogisticRegression(nn.Module):
    """Multinomial logistic regression: softmax(W x + b) on the flattened image."""

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int = 10) -> None:
        super().__init__()
        c, h, w = input_shape
        self.linear = nn.Linear(c * h * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (N, classes)."""
        out: torch.Tensor = self.linear(x.flatten(1))
        return out


class CNN(nn.Module):
    """conv(5×5, 6) → ReLU → maxpool 2 → conv(5×5, 16) → ReLU → maxpool 2 → FC 120 → 84 → classes."""

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int = 10) -> None:
        super().__init__()
        c, h, w = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, 6, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        fh, fw = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2
        self.classifier = nn.Sequential(
            nn.Linear(16 * fh * fw, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (N, classes)."""
        out: torch.Tensor = self.classifier(self.features(x).flatten(1))
        return out


def describe_network(
    name: str, input_shape: tuple[int, int, int], num_classes: int = 10
) -> dict[str, Any]:
    """The network as plain data that PyTorch alone rebuilds (issue 26: a buyer needs no code of
    this project): nested ``Sequential`` layers named so that the rebuilt module's
    ``state_dict`` keys equal the artifact's (``linear.weight``, ``features.0.weight``, …).

    Each layer is ``{"name", "type", "args"}`` with ``type`` a ``torch.nn`` class, or
    ``{"name", "type": "Sequential", "layers": [...]}``; the top level is a ``Sequential``.
    """
    c, h, w = input_shape

    def layer(n: str, kind: str, **args: int) -> dict[str, Any]:
        return {"name": n, "type": kind, "args": args}

    if name == "logistic":
        layers = [
            layer("flatten", "Flatten"),
            layer("linear", "Linear", in_features=c * h * w, out_features=num_classes),
        ]
    elif name == "cnn":
        fh, fw = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2
        features = [
            layer("0", "Conv2d", in_channels=c, out_channels=6, kernel_size=5),
            layer("1", "ReLU"),
            layer("2", "MaxPool2d", kernel_size=2),
            layer("3", "Conv2d", in_channels=6, out_channels=16, kernel_size=5),
            layer("4", "ReLU"),
            layer("5", "MaxPool2d", kernel_size=2),
        ]
        classifier = [
            layer("0", "Linear", in_features=16 * fh * fw, out_features=120),
            layer("1", "ReLU"),
            layer("2", "Linear", in_features=120, out_features=84),
            layer("3", "ReLU"),
            layer("4", "Linear", in_features=84, out_features=num_classes),
        ]
        layers = [
            {"name": "features", "type": "Sequential", "layers": features},
            layer("flatten", "Flatten"),
            {"name": "classifier", "type": "Sequential", "layers": classifier},
        ]
    else:
        raise ValueError(f"model must be 'logistic' or 'cnn', got {name!r}")
    return {"type": "Sequential", "layers": layers}


def build_model(
    name: str,
    input_shape: tuple[int, int, int],
    num_classes: int = 10,
    *,
    zero_init: bool = False,
    seed: int = 0,
) -> nn.Module:
    """A fresh model: w0 = 0 if ``zero_init``, else PyTorch's default init seeded by ``seed``."""
    if name not in ("logistic", "cnn"):
        raise ValueError(f"model must be 'logistic' or 'cnn', got {name!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: nn.Module = (
            LogisticRegression(input_shape, num_classes)
            if name == "logistic"
            else CNN(input_shape, num_classes)
        )
    if zero_init:
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
    return model


def get_weights(model: nn.Module) -> list[FloatArray]:
    """The model's parameters as float32 arrays, in ``state_dict`` order (copies)."""
    return [
        v.detach().cpu().numpy().astype(np.float32, copy=True) for v in model.state_dict().values()
    ]


def set_weights(model: nn.Module, weights: list[FloatArray]) -> None:
    """Load arrays (``state_dict`` order) into ``model``; shapes must match."""
    keys = list(model.state_dict().keys())
    if len(keys) != len(weights):
        raise ValueError(f"weights: model has {len(keys)} tensors, got {len(weights)} arrays")
    state = {}
    for k, w in zip(keys, weights, strict=True):
        state[k] = torch.as_tensor(np.asarray(w, dtype=np.float32))
    model.load_state_dict(state, strict=True)


def weight_names(model: nn.Module) -> list[str]:
    """``state_dict`` keys, the names artifacts store the arrays under."""
    return list(model.state_dict().keys())
