"""`mots reproduce`: the help teaches the profiles, a wrong setting is refused naming the option."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mots.cli.main import cli


def test_help_names_profiles_outputs_and_caching() -> None:
    """--help explains quick/full, the output directory, seeds, rounds and the training cache."""
    result = CliRunner().invoke(cli, ["reproduce", "--help"])
    assert result.exit_code == 0
    for needle in ("--quick / --full", "--out", "--seeds", "--rounds", "report.md", "--retrain"):
        assert needle in result.output, needle


def test_unknown_setting_is_rejected_before_any_training(tmp_path: Path) -> None:
    """A typo in --settings fails at once with the valid names, and writes nothing."""
    result = CliRunner().invoke(
        cli, ["reproduce", "--settings", "iid_logistc", "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2
    assert "iid_logistic" in result.output and "--settings" in result.output
    assert not (tmp_path / "r").exists()
