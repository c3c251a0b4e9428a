"""``--data TASK=PATH`` on the edge (issue 36): the SuperNode command carries it, the warm node
puts it into the node config as Flower parses it (``data-<task>``), and the market agent does not
join a round its device's data does not fit, saying why."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from flwr.common.config import parse_config_args

from edge.agent.__main__ import main as agent_cli
from edge.agent.runner import Agent
from edge.agent.settings import AgentSettings
from edge.agent.supernode import supernode_argv
from mots.client import MarketClient
from mots.economics.best_response import Choice, Strategy
from mots.training.task_data import node_task_data, task_data_pairs, with_task_data

UTILITY = '{"kind": "power", "scale": 1.0, "exponent": 8.0}'


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> AgentSettings:
    """A type-2 device attesting D = 120."""
    monkeypatch.setenv("MOTS_UTILITY", UTILITY)
    return AgentSettings(client_type="type-2", data_size=120, cost=1.2, client_index=0)


def test_the_supernode_command_carries_data_into_the_node_config(
    settings: AgentSettings, tmp_path: Path
) -> None:
    """supernode_argv → warm node: ``--data`` becomes data-<task> pairs Flower parses."""
    (tmp_path / "a b").mkdir()
    argv = supernode_argv(settings, {"fashion-mnist": str(tmp_path / "a b"), "digits": "/tmp"})
    args = with_task_data(argv[3:])
    assert "--data" not in args
    config = parse_config_args([args[args.index("--node-config") + 1]])
    assert node_task_data(config)["fashion-mnist"] == str(tmp_path / "a b")
    assert node_task_data(config)["digits"] == "/tmp"
    assert config["client-type"] == "type-2"  # the device's own pairs stay


def test_the_warm_node_refuses_a_missing_folder_and_a_bad_pair(tmp_path: Path) -> None:
    """A folder that is not there, or an item that is not TASK=PATH, stops the start."""
    with pytest.raises(ValueError, match="no such folder: digits="):
        with_task_data(["--data", f"digits={tmp_path / 'none'}"])
    with pytest.raises(ValueError, match="is not TASK=PATH"):
        task_data_pairs(["digits"])
    with pytest.raises(ValueError, match="is not a task name"):
        task_data_pairs(["Digits=/d"])


def test_the_agent_cli_refuses_a_malformed_data_option() -> None:
    """``python -m edge.agent run --data x`` is a usage error naming --data."""
    out = CliRunner().invoke(agent_cli, ["run", "--data", "nopath", "--max-steps", "0"])
    assert out.exit_code == 2 and "--data" in out.output, out.output


def _join() -> Choice:
    return Choice(Strategy.JOIN, {Strategy.JOIN: 1.0}, "best response")


def _folder(path: Path, n: int) -> Path:
    path.mkdir()
    np.savez(path / "d.npz", x=np.zeros((n, 1, 28, 28), np.uint8), y=np.zeros(n, np.int64))
    return path


def test_the_agent_does_not_join_when_its_data_does_not_fit(
    settings: AgentSettings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """100 samples against an attested D = 120: abstain, with the reason logged and recorded;
    120 samples: join; no --data at all: the public-set layout joins as before."""
    caplog.set_level(logging.ERROR, logger="edge.agent")
    market = MarketClient("http://127.0.0.1:9")
    few = Agent(settings, market, data={"fashion-mnist": str(_folder(tmp_path / "few", 100))})
    choice = few._fit(_join())
    assert choice.strategy is Strategy.ABSTAIN
    assert "holds 100 samples, fewer than the 120 this participant attested" in choice.reason
    assert "not joining" in caplog.text
    enough = Agent(settings, market, data={"fashion-mnist": str(_folder(tmp_path / "ok", 120))})
    assert enough._fit(_join()).strategy is Strategy.JOIN
    assert Agent(settings, market)._fit(_join()).strategy is Strategy.JOIN
    other = Agent(settings, market, data={"digits": str(tmp_path / "ok")})
    assert "no data for task fashion-mnist" in other._fit(_join()).reason
