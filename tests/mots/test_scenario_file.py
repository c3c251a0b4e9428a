"""Scenario files: YAML and JSON load; unreadable or invalid ones fail naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mots.scenario_file import ScenarioError, load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_examples_load(name: str) -> None:
    """Every shipped example is a valid scenario."""
    assert load_scenario(EXAMPLES / name).n_clients > 0


def test_json_equivalent(tmp_path: Path) -> None:
    """A .json file is read as JSON."""
    sc = load_scenario(EXAMPLES / "stall.yaml")
    path = tmp_path / "s.json"
    path.write_text(json.dumps(sc.model_dump()))
    assert load_scenario(path) == sc


def test_errors_name_field_and_file(tmp_path: Path) -> None:
    """A bad field is reported with its path; a missing file and bad YAML are clear too."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "types:\n  - {name: a, count: 0, data_size: 5, cost: 1}\nerror_model: {d_gamma2: 1}\n"
    )
    with pytest.raises(ScenarioError, match=r"types\.0\.count"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("types: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(broken)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(listy)
