"""The Pi's own facts file: ``MOTS_EDGE_*`` settings kept on the device, not in the pod spec.

The k3s overlay runs one SuperNode DaemonSet on every Pi (so a rollout takes at most its
``maxUnavailable`` Pis at once across the fleet); what differs per Pi (its client type, data size
D_i, cost C_i, which enrolment code it redeems) lives in ``/etc/mots/device/device.env`` on the Pi,
written when the Pi is prepared (k8s/overlays/k3s-pi/devices/ holds one per type). Variables set
in the environment win over the file's.
"""

from __future__ import annotations

import os
from pathlib import Path

from dotenv import dotenv_values

PREFIX = "MOTS_EDGE_"


class DeviceFileError(ValueError):
    """The device file is missing, unreadable, or sets something other than ``MOTS_EDGE_*``."""


def read_device_file(path: Path) -> dict[str, str]:
    """The ``KEY=value`` pairs of ``path`` (dotenv syntax); every key must be a MOTS_EDGE_ one."""
    if not path.is_file():
        raise DeviceFileError(f"device file {path} does not exist (prepare the Pi: docs/deploy.md)")
    values = dotenv_values(path)
    out: dict[str, str] = {}
    for key, value in values.items():
        if not key.startswith(PREFIX):
            raise DeviceFileError(f"{path}: {key} is not a {PREFIX}* setting")
        if value is None:
            raise DeviceFileError(f"{path}: {key} has no value")
        out[key] = value
    return out


def load_device_file(path: Path) -> dict[str, str]:
    """Put the file's settings into the environment where it has none; the ones it set."""
    applied = {}
    for key, value in read_device_file(path).items():
        if key not in os.environ:
            os.environ[key] = value
            applied[key] = value
    return applied
