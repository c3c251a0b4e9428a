"""The machine and software a reproduction ran on, for the report's setup section."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe_machine() -> dict[str, str | int]:
    """nproc, CPU model, OS and the versions of Python, numpy, torch and flwr."""
    return {
        "nproc": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 0,
        "cpu": _cpu_model(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "flwr": _version("flwr"),
        "matplotlib": _version("matplotlib"),
        "mots-platform": _version("mots-platform"),
    }
