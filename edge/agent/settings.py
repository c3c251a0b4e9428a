"""The agent's settings: the device's private facts and where the market and SuperLink are.

Read from environment variables with the prefix ``MOTS_EDGE_`` (one container, one device), and
the market's utility from ``MOTS_UTILITY``; both declared in the registry
(:mod:`mots.platform.settings.edge`, :class:`mots.platform.settings.rounds.MarketValue`).
"""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.settings.edge import EdgeDevice
from mots.platform.settings.rounds import MarketValue


class AgentSettings(BaseSettings, EdgeDevice, MarketValue):
    """One edge device: its type label, data size D_i, cost C_i, and the platform's addresses."""

    model_config = SettingsConfigDict(env_prefix="MOTS_EDGE_", extra="ignore")

    def node_key_path(self) -> Path:
        """Where this device's SuperNode private key lies (``node_key`` or the state directory's)."""
        return self.node_key if self.node_key is not None else self.state_dir / "supernode.key"

    def enrolment(self, task: str = DEFAULT_TASK) -> str | None:
        """The enrolment code to redeem for ``task``: the default task's is the variable's, else
        the file's; another task's is the file beside it named ``<file>.<task>`` (its own Secret,
        e.g. /etc/mots/enrolment/code.digits: a code attests one task); else None."""
        if task != DEFAULT_TASK:
            path = self.task_code_file(task)
            return (path.read_text().strip() or None) if path.is_file() else None
        if self.enrolment_code is not None:
            return self.enrolment_code.get_secret_value()
        if self.enrolment_code_file.is_file():
            return self.enrolment_code_file.read_text().strip() or None
        return None

    def task_code_file(self, task: str) -> Path:
        """Where ``task``'s enrolment code lies: the code file itself for the default task,
        ``<enrolment_code_file>.<task>`` for another."""
        if task == DEFAULT_TASK:
            return self.enrolment_code_file
        return self.enrolment_code_file.with_name(f"{self.enrolment_code_file.name}.{task}")

    def task_state_dir(self, task: str) -> Path:
        """Where the device's client of ``task`` keeps its credential and latest decision: the
        state directory for the default task (as before tasks), ``tasks/<task>`` below it for
        another (the heartbeat and the SuperNode key stay in the state directory: one device)."""
        return self.state_dir if task == DEFAULT_TASK else self.state_dir / "tasks" / task

    def device_name(self) -> str:
        """The name the device registers under: ``client_name`` or the host name."""
        return self.client_name or socket.gethostname()
