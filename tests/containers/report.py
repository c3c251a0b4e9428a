"""out/deploy/report.json: each part of `make images` / `make deploy-test` writes its own key
(images, compose, kube_play, arm64, network, leftovers), keeping the others, and the runner prints
the whole report as a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.containers.base import ROOT

REPORT = ROOT / "out" / "deploy" / "report.json"


def load(path: Path = REPORT) -> dict[str, Any]:
    """The report so far ({} before the first part)."""
    return json.loads(path.read_text()) if path.exists() else {}


def write_part(name: str, data: Any, path: Path = REPORT) -> dict[str, Any]:
    """Set one part of the report, keep the rest; return the whole report."""
    report = load(path)
    report[name] = data
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def _rows(prefix: str, value: Any) -> list[tuple[str, str]]:
    """Flatten nested dicts/lists into (dotted key, value) rows."""
    if isinstance(value, dict):
        return [r for k, v in value.items() for r in _rows(f"{prefix}.{k}" if prefix else k, v)]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [r for i, v in enumerate(value) for r in _rows(f"{prefix}[{i}]", v)]
    return [(prefix, json.dumps(value) if not isinstance(value, str) else value)]


def table(report: dict[str, Any]) -> str:
    """The report as two aligned columns, one row per leaf value."""
    rows = _rows("", report)
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
