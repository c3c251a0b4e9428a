"""The registry of model architectures: a name resolves to one module of this package (or, as
``package.module``, any importable module), so a new architecture is one new module.

An architecture module defines ``describe(input_shape, num_classes, **args) -> dict``: the
network as plain data (nested ``Sequential`` of ``torch.nn`` layers, the model file's ``network``,
docs/training.md "The model file"), which PyTorch alone rebuilds
(:func:`mots.client.model_file.build_network`, as a buyer's script does).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType
from typing import Any

from mots.client.model_file import LAYERS

_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")


class ArchitectureError(ValueError):
    """An architecture name that resolves to no module, or a module without ``describe``."""


def shipped() -> list[str]:
    """The architectures this package ships (its modules' names)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def resolve(name: str) -> ModuleType:
    """The module of architecture ``name``: a shipped name (``logistic``) or a dotted module path
    (``my_tasks.tiny_mlp``) whose module defines ``describe``."""
    if not _NAME.match(name):
        raise ArchitectureError(
            f"architecture {name!r}: must be a module name (lower case, digits, '_', dotted)"
        )
    target = name if "." in name else f"{__name__}.{name}"
    if "." not in name and name not in shipped():
        raise ArchitectureError(
            f"architecture {name!r} is not shipped ({', '.join(shipped())}); "
            "name a module of your own as package.module"
        )
    try:
        module = importlib.import_module(target)
    except ImportError as err:
        raise ArchitectureError(f"architecture {name!r}: cannot import {target} ({err})") from err
    if not callable(getattr(module, "describe", None)):
        raise ArchitectureError(f"architecture {name!r}: module {target} defines no describe()")
    return module


def describe(
    name: str, input_shape: tuple[int, ...], num_classes: int, args: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The network of architecture ``name`` for this input shape and label count, as plain data;
    every layer type must be one of :data:`LAYERS`."""
    spec: dict[str, Any] = resolve(name).describe(tuple(input_shape), num_classes, **(args or {}))
    _check_layers(spec, name)
    return spec


def _check_layers(spec: dict[str, Any], name: str) -> None:
    kind = spec.get("type")
    if kind not in LAYERS:
        raise ArchitectureError(
            f"architecture {name!r}: layer type {kind!r} is not one of {sorted(LAYERS)}"
        )
    for layer in spec.get("layers", []):
        _check_layers(layer, name)


def layer(name: str, kind: str, **args: int) -> dict[str, Any]:
    """One layer of a description: ``{"name", "type", "args"}``."""
    return {"name": name, "type": kind, "args": args}


def flat_size(input_shape: tuple[int, ...]) -> int:
    """The number of features of one flattened input."""
    size = 1
    for s in input_shape:
        size *= int(s)
    return size
