"""The Pi's device file: its facts reach the agent's settings, the environment wins, junk is refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge.agent.__main__ import main
from edge.agent.device_file import DeviceFileError, load_device_file, read_device_file
from edge.agent.settings import AgentSettings

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "k8s/overlays/k3s-pi/devices"
FACTS = ("MOTS_EDGE_CLIENT_TYPE", "MOTS_EDGE_DATA_SIZE", "MOTS_EDGE_COST")


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No facts in the environment; MOTS_UTILITY set (edge-config's, not the device file's)."""
    for key in (*FACTS, "MOTS_EDGE_ENROLMENT_CODE_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MOTS_UTILITY", '{"kind": "power", "scale": 1.0, "exponent": 8.0}')
    return monkeypatch


def test_a_shipped_device_file_gives_the_agent_its_facts(clean: pytest.MonkeyPatch) -> None:
    """devices/type-2.env, loaded, is what AgentSettings reads: type, D_i, C_i, code file."""
    applied = load_device_file(SHIPPED / "type-2.env")
    try:
        s = AgentSettings()
        assert (s.client_type, s.data_size, str(s.cost)) == ("type-2", 120, "1.2")
        assert s.enrolment_code_file == Path("/etc/mots/enrolment/type-2")
    finally:
        for key in applied:
            os.environ.pop(key, None)


def test_the_environment_wins_over_the_device_file(clean: pytest.MonkeyPatch) -> None:
    """A variable already set is left as it is; the file fills in only the missing ones."""
    clean.setenv("MOTS_EDGE_COST", "9")
    applied = load_device_file(SHIPPED / "type-1.env")
    try:
        assert "MOTS_EDGE_COST" not in applied
        assert os.environ["MOTS_EDGE_COST"] == "9"
        assert os.environ["MOTS_EDGE_CLIENT_TYPE"] == "type-1"
    finally:
        for key in applied:
            os.environ.pop(key, None)


@pytest.mark.parametrize(
    ("text", "match"),
    [("MOTS_TOKEN_SECRET=x\n", "not a MOTS_EDGE_"), ("MOTS_EDGE_COST\n", "has no value")],
)
def test_a_device_file_sets_only_edge_settings(tmp_path: Path, text: str, match: str) -> None:
    """Another service's variable, or a key without a value, is refused with the file's name."""
    path = tmp_path / "device.env"
    path.write_text(text)
    with pytest.raises(DeviceFileError, match=match):
        read_device_file(path)


def test_the_cli_reads_the_device_file_and_says_when_it_is_missing(
    clean: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``python -m edge.agent --device-file F node-key`` works with F's facts alone; a missing F
    stops it with the path in the message."""
    device = tmp_path / "device.env"
    shutil.copy(SHIPPED / "type-3.env", device)
    clean.setenv("MOTS_EDGE_STATE_DIR", str(tmp_path))
    before = dict(os.environ)
    try:
        got = CliRunner().invoke(main, ["--device-file", str(device), "node-key"])
        assert got.exit_code == 0, got.output
        assert "BEGIN PUBLIC KEY" in got.output
    finally:
        for key in set(os.environ) - set(before):
            os.environ.pop(key, None)
    missing = CliRunner().invoke(main, ["--device-file", str(tmp_path / "no.env"), "node-key"])
    assert missing.exit_code != 0
    assert "no.env does not exist" in missing.output
