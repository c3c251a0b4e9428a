"""What the CLI and the SDK read from the environment (``mots.client.config`` resolves them:
flags, then these variables, then a profile, then ``endpoints.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from mots.platform.settings.common import Operator
from mots.platform.settings.registry import Group


class ClientEnvironment(Group):
    """Where a client finds the platform and who it is there."""

    owner: ClassVar[str] = "client"

    market_url: str | None = Field(None, description="base URL of the market API")
    orchestration_url: str | None = Field(None, description="base URL of the rounds API")
    token: str | None = Field(
        None, description="this client's bearer token (`mots market register`)"
    )
    profile: str | None = Field(
        None, description="name of the profile to use (a table of the profiles file)"
    )
    profiles: Path | None = Field(
        None,
        description="the profiles file (unset: $XDG_CONFIG_HOME/mots/profiles.toml, else"
        " ~/.config/mots/profiles.toml)",
    )
    tasks_dir: str | None = Field(
        None,
        description="folders (separated by the OS path separator) where a task named by its name"
        " is looked up before the shipped examples/tasks (mots.tasks.task_file.task_dirs)",
    )
    workdir: Path | None = Field(
        None,
        description="folder of `mots platform up`: its databases, logs and the endpoints.json"
        " clients read (unset: out/platform)",
    )


class ClientSettings(BaseSettings, ClientEnvironment, Operator):
    """The variables the CLI and the SDK read (through ``mots.client.config``'s precedence)."""

    model_config = SettingsConfigDict(env_prefix="MOTS_", extra="ignore")
