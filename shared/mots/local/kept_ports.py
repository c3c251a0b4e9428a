"""The ports `mots platform up --free-ports` chose, kept in its work folder and chosen again by
the next `up` there while they are free, so the URLs in endpoints.json and in clients' profiles
stay the same across a restart (issue 40: every `up` moved the market, breaking every profile)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from mots.training.processes import port_free

PORTS_FILE = "ports.json"
"""WORKDIR's record of each process's port (``market``, ``market-worker``, ``prometheus``…)."""


def kept_ports(workdir: Path) -> dict[str, int]:
    """The ports the last `up` in ``workdir`` used that are free now (a taken one is left out:
    that process gets a new free port); empty when none were kept or the file is unreadable."""
    try:
        data = json.loads((workdir / PORTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(name): port
        for name, port in data.items()
        if isinstance(port, int) and 1024 <= port <= 65535 and port_free(port)
    }


def keep_ports(workdir: Path, ports: Mapping[str, int]) -> Path:
    """Record ``ports`` in WORKDIR/ports.json (atomically) for the next `up` there."""
    path = workdir / PORTS_FILE
    tmp = path.with_name(f".{PORTS_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dict(sorted(ports.items())), indent=1))
    tmp.replace(path)
    return path
