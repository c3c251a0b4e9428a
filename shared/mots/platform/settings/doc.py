"""Render ``docs/settings.md`` from the registry: every variable, its owner, readers and rules.

    python -m mots.platform.settings.doc > docs/settings.md

The readers are the settings classes of the processes, named below by import path (the services
are not imported by ``mots.platform``'s code, only loaded here to be listed).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from mots.platform.settings.registry import Group

READERS = {
    "market": "services.market.core.config:Settings",
    "pricing": "services.pricing.core.config:Settings",
    "orchestration": "services.orchestration.core.config:Settings",
    "evaluation": "services.evaluation.core.config:Settings",
    "edge agent": "edge.agent.settings:AgentSettings",
    "training": "mots.training.settings:TrainingSettings",
    "CLI/SDK": "mots.platform.settings.client:ClientSettings",
}
"""Each process's (or tool's) settings class: what it reads is what it inherits."""


@dataclass
class Variable:
    """One environment variable: the group declaring it, its field, and who reads it."""

    name: str
    group: type[Group]
    field_name: str
    info: FieldInfo
    annotation: str
    readers: list[str] = field(default_factory=list)


def load(path: str) -> type[BaseSettings]:
    """The class at ``module:attribute``."""
    module, _, attr = path.partition(":")
    cls: type[BaseSettings] = getattr(importlib.import_module(module), attr)
    return cls


def declaring_group(cls: type[Any], field_name: str) -> type[Any]:
    """The class of ``cls``'s MRO whose body declares ``field_name``."""
    for klass in cls.__mro__:
        if field_name in vars(klass).get("__annotations__", {}):
            return klass
    raise LookupError(f"{cls.__name__}.{field_name}: declared nowhere")


def env_name(cls: type[BaseSettings], field_name: str, info: FieldInfo) -> str:
    """The variable pydantic-settings reads for the field: its alias, else prefix + name."""
    if isinstance(info.validation_alias, str):
        return info.validation_alias.upper()
    return (str(cls.model_config.get("env_prefix", "")) + field_name).upper()


def variables(readers: dict[str, type[BaseSettings]]) -> dict[str, Variable]:
    """Every variable some reader reads, by name (one declaration each, else LookupError)."""
    out: dict[str, Variable] = {}
    for reader, cls in readers.items():
        for fname, info in cls.model_fields.items():
            group = declaring_group(cls, fname)
            name = env_name(cls, fname, info)
            var = out.get(name)
            if var is None:
                annotation = vars(group)["__annotations__"][fname]
                var = out[name] = Variable(name, group, fname, info, str(annotation))
            elif var.group is not group:
                raise LookupError(
                    f"{name}: declared in {var.group.__qualname__} and {group.__qualname__}"
                )
            var.readers.append(reader)
    return out


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.default if info.default_factory is None else info.default_factory()  # type: ignore[call-arg]
    if value is None:
        return "unset"
    if hasattr(value, "get_secret_value"):
        return "(development value)"
    return f"`{value!s}`" if str(value) != "" else '`""`'


def _bounds(info: FieldInfo) -> str:
    parts = []
    for m in info.metadata:
        for kind, attr, symbol in (
            (Ge, "ge", "≥"),
            (Gt, "gt", ">"),
            (Le, "le", "≤"),
            (Lt, "lt", "<"),
        ):
            if isinstance(m, kind):
                parts.append(f"{symbol} {getattr(m, attr)}")
        if isinstance(m, MinLen):
            parts.append(f"length ≥ {m.min_length}")
        if isinstance(m, MaxLen):
            parts.append(f"length ≤ {m.max_length}")
    return ", ".join(parts)


def render(found: dict[str, Variable]) -> str:
    """docs/settings.md: one table per owner, variables in name order."""
    lines = [
        "# Settings",
        "",
        "Every `MOTS_*` environment variable the platform reads, generated from the settings",
        "registry (`shared/mots/platform/settings/`) by `python -m mots.platform.settings.doc >"
        " docs/settings.md`;",
        "a test (`tests/mots/platform/settings/test_registry.py`) fails when this file is stale.",
        "Each variable is declared once, by its owner; *read by* lists the processes whose",
        "settings class selects it. A deployment (compose, k8s) sets every variable its",
        "containers read whose default is not *unset* (`tests/deploy/test_env_vars.py`).",
        "",
    ]
    owners = sorted({v.group.owner for v in found.values()}, key=_owner_order)
    for owner in owners:
        lines += [
            f"## {owner}",
            "",
            "| variable | type | default | bounds | read by | description |",
            "|---|---|---|---|---|---|",
        ]
        for v in sorted((v for v in found.values() if v.group.owner == owner), key=_key):
            desc = (v.info.description or "").replace("|", "\\|")
            annotation = v.annotation.replace("|", "\\|")
            lines.append(
                f"| `{v.name}` | `{annotation}` | {_default(v.info)} | {_bounds(v.info)} |"
                f" {', '.join(v.readers)} | {desc} |"
            )
        lines.append("")
    return "\n".join(lines)


def _key(v: Variable) -> str:
    return v.name


def _owner_order(owner: str) -> tuple[int, str]:
    order = ["platform", "market", "pricing", "orchestration", "evaluation", "training"]
    return (order.index(owner) if owner in order else len(order), owner)


def main() -> None:
    """Print docs/settings.md."""
    found = variables({name: load(path) for name, path in READERS.items()})
    sys.stdout.write(render(found))


if __name__ == "__main__":
    main()
