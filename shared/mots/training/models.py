"""The paper's models (Section 5): multinomial logistic regression (convex) and the CNN.

The CNN has two convolutional layers with ReLU, max pooling after each, and three fully connected
layers. ``zero_init`` sets w0 = 0 as the paper does; for the CNN this leaves every hidden unit
identical (zero gradients below the last layer), so it is offered but not the CNN's default.
"""

from __future__ import annotations

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
