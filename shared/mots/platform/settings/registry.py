"""The registry's building block: a :class:`Group` of environment variables one owner declares.

Every ``MOTS_*`` variable is a field of exactly one group in this package (its type, bounds,
default and one-line description written once); a process's settings class selects the groups it
reads by inheriting them (``class Settings(PlatformSettings, Rounds, Training): ...``), so two
services that read the same variable read the same declaration. ``docs/settings.md`` is rendered
from the groups (:mod:`mots.platform.settings.doc`) and a test keeps it current.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class Group(BaseModel):
    """Variables declared together by one owner; mixed into the settings classes that read them.

    ``owner`` is the component that defines what the variables mean (the platform for what every
    service shares); ``prefix`` is the prefix the settings classes reading the group use.
    """

    model_config = ConfigDict(populate_by_name=True)

    owner: ClassVar[str] = "platform"
    prefix: ClassVar[str] = "MOTS_"
