"""The settings registry: each variable declared once, selected by the processes, documented.

``docs/settings.md`` is rendered from the registry and must equal what the registry renders now;
every process's settings class declares no variable itself (it selects groups); no two names
differ only by an underscore or a synonym; every ``MOTS_*`` name the code mentions is declared.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from mots.platform.settings import doc
from mots.platform.settings.registry import Group

ROOT = Path(__file__).resolve().parents[4]
CODE_DIRS = ("services", "edge", "shared/mots")
SYNONYMS = {"ROOT": "DIR", "FOLDER": "DIR", "PATH": "DIR", "DIRECTORY": "DIR"}
"""Words that name the same thing in a variable (MOTS_ARTIFACT_ROOT vs MOTS_ARTIFACT_DIR)."""


@pytest.fixture(scope="module")
def readers() -> dict[str, type[BaseSettings]]:
    return {name: doc.load(path) for name, path in doc.READERS.items()}


@pytest.fixture(scope="module")
def found(readers: dict[str, type[BaseSettings]]) -> dict[str, doc.Variable]:
    return doc.variables(readers)


def test_docs_settings_is_current(found: dict[str, doc.Variable]) -> None:
    """docs/settings.md is what the registry renders (regenerate it with the command it names)."""
    current = (ROOT / "docs" / "settings.md").read_text()
    assert current == doc.render(found), (
        "docs/settings.md is stale: python -m mots.platform.settings.doc > docs/settings.md"
    )


def test_readers_select_groups_and_declare_nothing(readers: dict[str, type[BaseSettings]]) -> None:
    """Every field of a process's settings comes from a registry group with the reader's prefix."""
    problems = []
    for name, cls in readers.items():
        prefix = str(cls.model_config.get("env_prefix", ""))
        for field_name, info in cls.model_fields.items():
            group = doc.declaring_group(cls, field_name)
            if not (issubclass(group, Group) and group.__module__.startswith("mots.platform.")):
                problems.append(f"{name}: {field_name} declared in {group.__qualname__}")
            elif info.validation_alias is None and group.prefix != prefix:
                problems.append(f"{name}: {field_name} of {group.__qualname__} read as {prefix}")
    assert not problems, problems


def _normal(name: str) -> str:
    words = name.removeprefix("MOTS_").split("_")
    return "".join(SYNONYMS.get(w, w) for w in words)


def test_no_two_names_differ_by_an_underscore_or_a_synonym(found: dict[str, doc.Variable]) -> None:
    """MOTS_WORKDIR and MOTS_WORK_DIR, MOTS_ARTIFACT_ROOT and MOTS_ARTIFACT_DIR cannot coexist."""
    seen: dict[str, str] = {}
    clashes = []
    for name in sorted(found):
        key = _normal(name)
        if key in seen:
            clashes.append((seen[key], name))
        seen[key] = name
    assert not clashes, clashes
    assert _normal("MOTS_ARTIFACT_ROOT") == _normal("MOTS_ARTIFACT_DIR")
    assert _normal("MOTS_WORK_DIR") == _normal("MOTS_WORKDIR")


def test_every_name_the_code_mentions_is_declared(found: dict[str, doc.Variable]) -> None:
    """A ``MOTS_X`` in the code (read, set for a child process, or named in a message) exists."""
    stray = set()
    for base in CODE_DIRS:
        for path in (ROOT / base).rglob("*.py"):
            for name in re.findall(r"\bMOTS_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()):
                if name not in found:
                    stray.add((str(path.relative_to(ROOT)), name))
    assert not stray, sorted(stray)


def test_a_second_declaration_is_refused(readers: dict[str, type[BaseSettings]]) -> None:
    """A reader declaring MOTS_REDIS_URL again (even with the same type) is found."""

    class Again(Group):
        owner: ClassVar[str] = "somebody"
        redis_url: str = Field("redis://elsewhere", description="a second declaration")

    class Stray(BaseSettings, Again):
        model_config = SettingsConfigDict(env_prefix="MOTS_", extra="ignore")

    with pytest.raises(LookupError, match="MOTS_REDIS_URL"):
        doc.variables({**readers, "stray": Stray})


def test_a_changed_declaration_makes_the_doc_stale(found: dict[str, doc.Variable]) -> None:
    """The rendering shows the bounds and defaults, so changing one changes the document."""
    text = doc.render(found)
    assert "| `MOTS_MAX_TYPES` | `int` | `32` | ≥ 1, ≤ 1024 | market, pricing |" in text
    var = found["MOTS_MAX_TYPES"]
    changed = {**found, "MOTS_MAX_TYPES": doc.Variable(**{**var.__dict__, "readers": ["pricing"]})}
    assert doc.render(changed) != text


def test_one_declaration_serves_every_reader(readers: dict[str, type[BaseSettings]]) -> None:
    """The services that share a variable share its rules: the same bound refuses in both."""
    market, pricing = readers["market"], readers["pricing"]
    for cls in (market, pricing):
        with pytest.raises(ValueError, match="max_types"):
            cls(max_types=1025)
    assert market(database_url="sqlite://").database_url == "sqlite://"
    assert market().database_url == "sqlite:///out/platform/market.db"
    assert readers["evaluation"]().database_url == "sqlite:///out/platform/evaluation.db"
