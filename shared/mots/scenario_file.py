"""Read a :class:`~mots.economics.scenario.Scenario` from a YAML or JSON file (the core stays I/O-free)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from mots.economics.scenario import Scenario

MAX_CLIENTS = 10**15
"""Σ N_i above this is refused: float64 holds every integer only up to 2^53 ≈ 9·10^15, and from
about 10^18 the int64 state arithmetic overflows (measured: 10^17 clients still price in 0.1 s)."""


class ScenarioError(ValueError):
    """A scenario file that cannot be read or does not validate; the message names field and rule."""


class ScenarioFileError(ScenarioError):
    """A scenario file that cannot be read as text at all (missing, unreadable, not UTF-8)."""


class ScenarioRangeError(ScenarioError):
    """A valid scenario beyond what the solver computes exactly (too many clients)."""


def check_range(scenario: Scenario, source: str = "scenario") -> Scenario:
    """Refuse a scenario of more than :data:`MAX_CLIENTS` clients (one line naming the field)."""
    total = sum(t.count for t in scenario.types)
    if total > MAX_CLIENTS:
        raise ScenarioRangeError(
            f"{source}: types: Σ count = {total} clients exceed {MAX_CLIENTS:.0e}, beyond which "
            "float64 arithmetic no longer represents the counts exactly"
        )
    return scenario


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
        raise ScenarioFileError(f"{p}: cannot read scenario file ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise ScenarioFileError(
            f"{p}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "save the scenario as UTF-8"
        ) from err
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ScenarioError(
            f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {err}"
        ) from err
    return parse_scenario(data, str(p))
