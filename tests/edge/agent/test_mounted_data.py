"""A device as compose and k3s run it (issue 36): its own folders mounted at /data/<task>, the
edge containers started with ``--data TASK=/data/TASK``, no public set and no ``client-index``
file. The node config the SuperNode command makes reaches the ClientApp as Flower parses it; a
folder that does not fit (wrong shape, fewer samples than the attested D) refuses the round with
the reason in the log; the agent checks a task the edge image ships no task file for against the
market's own task."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.common.config import parse_config_args

import mots.tasks.task_file as task_file
from edge.agent.runner import Agent
from edge.agent.settings import AgentSettings
from edge.agent.supernode import supernode_argv
from edge.flower_app import client_app
from mots.client import MarketClient
from mots.economics.best_response import Choice, Strategy
from mots.tasks.task_file import load_task
from mots.training import flower_messages as fm
from mots.training.config import TrainConfig
from mots.training.task_data import with_task_data
from tests.edge.flower_app.test_client_app import _train_msg, task_identity

__all__ = ["task_identity"]  # the autouse fixture, imported to apply here too

UTILITY = '{"kind": "power", "scale": 1.0, "exponent": 8.0}'
CFG = TrainConfig(counts=(2, 1, 1), seed=3, rounds=1, local_steps=3)  # D = 50, 120, 300
RUN = {fm.RUN_TRAIN_CONFIG: json.dumps(CFG.model_dump(mode="json")), fm.RUN_NOOP: False}


def _device(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AgentSettings:
    """A type-3 device (D = 300) as a Pi runs it: no MOTS_EDGE_CLIENT_INDEX, and its data
    directory (the former public set with client-index) absent."""
    monkeypatch.setenv("MOTS_UTILITY", UTILITY)
    monkeypatch.delenv("MOTS_EDGE_CLIENT_INDEX", raising=False)
    return AgentSettings(
        client_type="type-3", data_size=300, cost=3.0, data_dir=tmp_path / "no-public-set"
    )


def _folder(path: Path, n: int, side: int = 28) -> Path:
    path.mkdir(parents=True)
    rng = np.random.default_rng(n)
    x = rng.integers(0, 256, (n, 1, side, side), dtype=np.uint8)
    np.savez(path / "d.npz", x=x, y=rng.integers(0, 10, n).astype(np.int64))
    return path


def _node_config(settings: AgentSettings, data: dict[str, str]) -> dict[str, Any]:
    """The node config the device's SuperNode runs with, as Flower parses it."""
    args = with_task_data(supernode_argv(settings, data)[3:])
    return dict(parse_config_args([args[args.index("--node-config") + 1]]))


def test_a_device_of_own_data_needs_neither_the_public_set_nor_a_client_index(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--data given: the node config names the folders, no data-dir, and index 0 (it only seeds
    the batch order); without --data the public-set layout still needs its client-index."""
    settings = _device(monkeypatch, tmp_path)
    own = str(_folder(tmp_path / "fashion-mnist", 300))
    config = _node_config(settings, {"fashion-mnist": own})
    assert config["data-fashion-mnist"] == own
    assert config["client-index"] == 0 and fm.NODE_DATA_DIR not in config
    with pytest.raises(ValueError, match="MOTS_EDGE_CLIENT_INDEX is unset"):
        supernode_argv(settings)


def test_a_mounted_folder_that_fits_trains(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """300 Fashion-MNIST-shaped samples for a D = 300 device: the round trains on them."""
    settings = _device(monkeypatch, tmp_path)
    config = _node_config(settings, {"fashion-mnist": str(_folder(tmp_path / "fm", 300))})
    reply = client_app.app(_train_msg(), _context(config))
    assert not reply.has_error(), reply.error
    assert reply.content.metric_records["metrics"]["samples"] > 0


@pytest.mark.parametrize(
    ("n", "side", "said"),
    [
        (50, 28, "holds 50 samples, fewer than the 300 this participant attested"),
        (400, 8, "each sample has shape [1, 8, 8], the task expects [1, 28, 28]"),
    ],
)
def test_a_mounted_folder_that_does_not_fit_refuses_the_round_in_the_log(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    n: int,
    side: int,
    said: str,
) -> None:
    """Fewer samples than the attested D, or samples of another shape: the round fails (Flower
    returns the error to the ServerApp) and the SuperNode's log says why."""
    caplog.set_level(logging.ERROR, logger="mots.edge.client_app")
    settings = _device(monkeypatch, tmp_path)
    config = _node_config(settings, {"fashion-mnist": str(_folder(tmp_path / "fm", n, side))})
    with pytest.raises(ValueError, match="does not fit task fashion-mnist"):
        client_app.app(_train_msg(), _context(config))
    assert "round 0 refused" in caplog.text and said in caplog.text


def _context(node_config: dict[str, Any]) -> Any:
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=7, node_config=node_config, state=RecordDict(), run_config=RUN)  # type: ignore[arg-type]


class _Market(MarketClient):
    """The market's ``GET /v1/tasks/{name}`` answered from the shipped task file."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")
        self.asked: list[str] = []
        self.stored = {"digits": load_task("digits").model_dump(mode="json")}

    def task(self, name: str, version: int | None = None) -> Any:
        self.asked.append(name)
        return type("TaskOut", (), {"spec": self.stored[name]})()


def test_the_agent_checks_a_task_the_image_has_no_file_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The edge image ships no task files: the agent checks its digits folder against the
    market's digits task, joining when it fits and abstaining, with the reason, when it does
    not."""
    settings = _device(monkeypatch, tmp_path)
    market = _Market()  # the device's token-carrying client (the route wants a principal)
    join = Choice(Strategy.JOIN, {Strategy.JOIN: 1.0}, "best response")
    good = {"digits": str(_folder(tmp_path / "good", 300, side=8))}
    monkeypatch.setattr(task_file, "SHIPPED_DIR", tmp_path / "no-task-files")
    anonymous = MarketClient("http://127.0.0.1:9")
    fits = Agent(settings, anonymous, data=good, task="digits")._fit(join, market)
    assert fits.strategy is Strategy.JOIN, fits.reason
    assert market.asked == ["digits"]
    bad = {"digits": str(_folder(tmp_path / "bad", 300))}
    choice = Agent(settings, anonymous, data=bad, task="digits")._fit(join, market)
    assert choice.strategy is Strategy.ABSTAIN
    assert "each sample has shape [1, 28, 28], the task expects [1, 8, 8]" in choice.reason
