"""Read a :class:`~mots.economics.scenario.Scenario` from a YAML or JSON file (the core stays I/O-free)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from mots.economics.scenario import Scenario


class ScenarioError(ValueError):
    """A scenario file that cannot be read or does not validate; the message names field and rule."""


def _format_validation_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(scenario)"
        lines.append(f"  {loc}: {e['msg']}")
    return "\n".join(lines)


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    """Validate already-parsed YAML/JSON data into a Scenario, with errors naming each field."""
    if not isinstance(data, dict):
        raise ScenarioError(
            f"{source}: expected a mapping with 'types' and 'error_model' at the top"
        )
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(
            f"{source} is not a valid scenario:\n{_format_validation_error(err)}"
        ) from err


def load_scenario(path: str | Path) -> Scenario:
    """Load a scenario from ``path`` (YAML, or JSON by its .json suffix)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"{p}: cannot read scenario file ({err.strerror})") from err
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ScenarioError(
            f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {err}"
        ) from err
    return parse_scenario(data, str(p))
