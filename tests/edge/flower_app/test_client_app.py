"""The ClientApp's handlers, called as flwr-clientapp calls them (real Message and Context)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from edge.flower_app import client_app
from mots.training import flower_messages as fm
from mots.training.config import TrainConfig
from mots.training.edge_trainer import handle_train

FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(autouse=True)
def task_identity() -> Iterator[None]:
    """What flwr-clientapp sets at start-up: the task's run, node and task ids."""
    before = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 7, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = before


def _context(run_config: dict[str, object], **node: object) -> Context:
    node_config = {"type-index": 2, "client-index": 0, "client-type": "type-3", **node}
    return Context(
        run_id=1, node_id=7, node_config=node_config, state=RecordDict(), run_config=run_config
    )  # type: ignore[arg-type]


def _train_msg(round_index: int = 0) -> Message:
    arrays = ArrayRecord([np.zeros((10, 784), np.float32), np.zeros(10, np.float32)])
    content = RecordDict({"arrays": arrays, "config": ConfigRecord({"round": round_index})})
    return Message(content, dst_node_id=7, message_type=MessageType.TRAIN)


def test_no_query_handler() -> None:
    """Nodes are told apart by their keys: the ClientApp answers no identity query."""
    msg = Message(
        RecordDict({"q": ConfigRecord({"ask": "identity"})}),
        dst_node_id=7,
        message_type=MessageType.QUERY,
    )
    with pytest.raises(Exception, match="query"):
        client_app.app(msg, _context({}))


def test_noop_echoes_weights() -> None:
    """With noop the weights come back untouched and no training time is reported."""
    reply = client_app.app(_train_msg(), _context({fm.RUN_NOOP: True}))
    assert not reply.has_error()
    assert float(np.abs(reply.content.array_records["arrays"].to_numpy_ndarrays()[0]).max()) == 0.0
    assert reply.content.metric_records["metrics"]["train_seconds"] == 0.0


def test_train_in_process_matches_local_update() -> None:
    """Without a trainer socket the ClientApp trains in its own process: the same update as handle_train."""
    if not (FASHION / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing")
    cfg = TrainConfig(data_dir=FASHION, rounds=1, local_steps=3)
    run_config = {fm.RUN_TRAIN_CONFIG: json.dumps(cfg.model_dump(mode="json")), fm.RUN_NOOP: False}
    reply = client_app.app(_train_msg(), _context(run_config))
    assert not reply.has_error(), reply.error
    got = reply.content.array_records["arrays"].to_numpy_ndarrays()
    request = {
        "config": cfg.model_dump(mode="json"),
        "type_index": 2,
        "client_index": 0,
        "round": 0,
    }
    want, _ = handle_train(request, [np.zeros((10, 784), np.float32), np.zeros(10, np.float32)])
    np.testing.assert_allclose(got[0], want[0], atol=1e-6)
    assert reply.content.metric_records["metrics"]["num_examples"] == 300


def test_missing_identity_raises() -> None:
    """A node without client-index raises naming the key (flwr-clientapp turns it into an error reply)."""
    ctx = Context(
        run_id=1,
        node_id=7,
        node_config={"client-type": "type-1"},
        state=RecordDict(),
        run_config={},
    )
    cfg = TrainConfig(data_dir=FASHION, rounds=1, local_steps=1)
    ctx.run_config.update(  # type: ignore[union-attr]
        {fm.RUN_TRAIN_CONFIG: json.dumps(cfg.model_dump(mode="json")), fm.RUN_NOOP: False}
    )
    with pytest.raises(Exception, match="client-index"):
        client_app.app(_train_msg(), ctx)


def test_node_identity_forms() -> None:
    """type-index (0-based) wins; else client-type 'type-<n>' (1-based) or a bare integer."""
    assert fm.node_identity({"type-index": 1, "client-index": 3}) == (1, 3)
    assert fm.node_identity({"client-type": "type-2", "client-index": 0}) == (1, 0)
    assert fm.node_identity({"client-type": "0", "client-index": 4}) == (0, 4)
    with pytest.raises(ValueError, match="type-index"):
        fm.node_identity({"client-type": "big", "client-index": 0})


def test_node_data_dir_wins(tmp_path: Path) -> None:
    """A device's own data-dir (node config) is where its partition is read from."""
    cfg = TrainConfig(data_dir=FASHION, rounds=1, local_steps=1)
    run_config = {fm.RUN_TRAIN_CONFIG: json.dumps(cfg.model_dump(mode="json")), fm.RUN_NOOP: False}
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "device")):
        client_app.app(_train_msg(), _context(run_config, **{"data-dir": str(tmp_path / "device")}))
