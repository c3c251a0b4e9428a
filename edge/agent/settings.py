"""The agent's settings: the device's private facts and where the market and SuperLink are.

Read from environment variables with the prefix ``MOTS_EDGE_`` (one container, one device), and
the market's utility from ``MOTS_UTILITY``; both declared in the registry
(:mod:`mots.platform.settings.edge`, :class:`mots.platform.settings.rounds.MarketValue`).
"""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from mots.platform.settings.edge import EdgeDevice
from mots.platform.settings.rounds import MarketValue


class AgentSettings(BaseSettings, EdgeDevice, MarketValue):
    """One edge device: its type label, data size D_i, cost C_i, and the platform's addresses."""

    model_config = SettingsConfigDict(env_prefix="MOTS_EDGE_", extra="ignore")

    def node_key_path(self) -> Path:
        """Where this device's SuperNode private key lies (``node_key`` or the state directory's)."""
        return self.node_key if self.node_key is not None else self.state_dir / "supernode.key"

    def enrolment(self) -> str | None:
        """The enrolment code to redeem: the variable's, else the file's, else None."""
        if self.enrolment_code is not None:
            return self.enrolment_code.get_secret_value()
        if self.enrolment_code_file.is_file():
            return self.enrolment_code_file.read_text().strip() or None
        return None

    def device_name(self) -> str:
        """The name the device registers under: ``client_name`` or the host name."""
        return self.client_name or socket.gethostname()
