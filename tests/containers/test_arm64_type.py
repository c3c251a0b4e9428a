"""tests/containers/arm64.py reads the arm64 device's client type from its compose override (the
one place it is set), not a copy of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.containers import arm64


def test_type_is_the_overrides() -> None:
    services = yaml.safe_load(arm64.OVERRIDE.read_text())["services"]
    assert arm64.client_type() == services["agent-arm64"]["environment"]["MOTS_EDGE_CLIENT_TYPE"]
    secret = services["agent-arm64"]["secrets"][0]["source"]
    assert secret == f"enrolment-{arm64.client_type()}"  # the pair enrols as its own type


def test_type_follows_an_edited_override(tmp_path: Path) -> None:
    text = arm64.OVERRIDE.read_text().replace(
        "MOTS_EDGE_CLIENT_TYPE: type-2", "MOTS_EDGE_CLIENT_TYPE: type-3"
    )
    assert text != arm64.OVERRIDE.read_text()
    edited = tmp_path / "override.yaml"
    edited.write_text(text)
    assert arm64.client_type(edited) == "type-3"


def test_pair_disagreeing_is_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load(arm64.OVERRIDE.read_text())
    doc["services"]["agent-arm64"]["environment"] = {"MOTS_EDGE_CLIENT_TYPE": "type-1"}
    edited = tmp_path / "override.yaml"
    edited.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match="different client types"):
        arm64.client_type(edited)
