"""The ClientApp on the device's own data (issue 36): a node whose config names a folder for the
run's task (``data-<task>``) trains on that folder and nothing else; a folder that does not fit,
holds fewer samples than the type's D, or is for another task makes the round fail with the
reason, which the SuperNode's log shows. Called as flwr-clientapp calls it (real Message,
Context)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from edge.flower_app import client_app
from mots.tasks.split import split_public
from mots.tasks.task_file import load_task
from mots.training import flower_messages as fm
from mots.training.config import TrainConfig
from tests.edge.flower_app.test_client_app import _context, _train_msg, task_identity

__all__ = ["task_identity"]  # the autouse fixture, imported to apply here too

CFG = TrainConfig(counts=(2, 1, 1), seed=3, rounds=1, local_steps=3)
RUN = {fm.RUN_TRAIN_CONFIG: json.dumps(CFG.model_dump(mode="json")), fm.RUN_NOOP: False}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int], Path]:
    """The demo's folders of Fashion-MNIST for CFG's population (D = 50, 120, 300)."""
    if not Path("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing: apt-get install -y dataset-fashion-mnist")
    out = tmp_path_factory.mktemp("data")
    return split_public(load_task("fashion-mnist"), out, sizes=CFG.sizes, counts=(2, 1, 1), seed=3)


def _weights(reply: object) -> list[np.ndarray]:
    assert not reply.has_error(), reply.error  # type: ignore[attr-defined]
    return reply.content.array_records["arrays"].to_numpy_ndarrays()  # type: ignore[attr-defined,no-any-return]


def test_own_data_trains_exactly_what_the_public_slice_did(
    folders: dict[tuple[int, int], Path],
) -> None:
    """The split's folder of client (3, 0) gives the update the client-index slice gave."""
    public = _weights(client_app.app(_train_msg(), _context(RUN)))
    own = client_app.app(
        _train_msg(), _context(RUN, **{"data-fashion-mnist": str(folders[(2, 0)])})
    )
    for a, b in zip(public, _weights(own), strict=True):
        np.testing.assert_array_equal(a, b)


def test_own_data_is_what_trains(folders: dict[tuple[int, int], Path], tmp_path: Path) -> None:
    """Another folder of the same size (a type-3 device holding other samples) trains to
    another model: the node's folder is read, not the public set."""
    x = np.load(folders[(2, 0)] / "data.npz")
    np.savez(tmp_path / "data.npz", x=255 - x["x"], y=x["y"])
    public = _weights(client_app.app(_train_msg(), _context(RUN)))
    own = _weights(
        client_app.app(_train_msg(), _context(RUN, **{"data-fashion-mnist": str(tmp_path)}))
    )
    assert not np.array_equal(public[0], own[0])


def test_fewer_samples_than_attested_refuses_the_round(
    folders: dict[tuple[int, int], Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A type-3 node (D = 300) holding a type-1 folder (50 samples): the round fails (Flower
    returns the error to the ServerApp), and the log says why in plain words."""
    caplog.set_level(logging.ERROR, logger="mots.edge.client_app")
    with pytest.raises(ValueError, match="does not fit task fashion-mnist"):
        client_app.app(_train_msg(), _context(RUN, **{"data-fashion-mnist": str(folders[(0, 0)])}))
    assert "holds 50 samples, fewer than the 300 this participant attested" in caplog.text


def test_data_of_the_wrong_shape_refuses_the_round(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Digits (8×8) in a Fashion-MNIST folder: refused, never trained."""
    caplog.set_level(logging.ERROR, logger="mots.edge.client_app")
    np.savez(tmp_path / "d.npz", x=np.zeros((400, 1, 8, 8), np.uint8), y=np.zeros(400, np.int64))
    with pytest.raises(ValueError, match="does not fit task fashion-mnist"):
        client_app.app(_train_msg(), _context(RUN, **{"data-fashion-mnist": str(tmp_path)}))
    assert "each sample has shape [1, 8, 8], the task expects [1, 28, 28]" in caplog.text


def test_data_for_another_task_only_refuses_the_round(
    folders: dict[tuple[int, int], Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A device holding digits data only does not fall back to the public set."""
    caplog.set_level(logging.ERROR, logger="mots.edge.client_app")
    with pytest.raises(ValueError, match="no data for task fashion-mnist"):
        client_app.app(_train_msg(), _context(RUN, **{"data-digits": str(folders[(2, 0)])}))
    assert (
        "this device holds no data for task fashion-mnist (its --data names digits)" in caplog.text
    )


def test_a_device_without_task_files_knows_fashion_mnist(
    folders: dict[tuple[int, int], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edge image ships no examples/tasks: the image set's own spec checks the folder, and
    the update is the one the task file's spec gives."""
    import mots.tasks.task_file as task_file

    with_files = _weights(
        client_app.app(_train_msg(), _context(RUN, **{"data-fashion-mnist": str(folders[(2, 0)])}))
    )
    shipped = load_task("fashion-mnist").data
    monkeypatch.setattr(task_file, "SHIPPED_DIR", tmp_path)
    with pytest.raises(task_file.TaskFileError):
        load_task("fashion-mnist")
    spec = task_file.DataSpec.model_validate(fm.task_data_spec({}, "fashion-mnist"))
    assert (spec.input_shape, spec.labels, spec.scale) == (
        shipped.input_shape,
        shipped.labels,
        shipped.scale,
    )
    without = _weights(
        client_app.app(_train_msg(), _context(RUN, **{"data-fashion-mnist": str(folders[(2, 0)])}))
    )
    for a, b in zip(with_files, without, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_run_carries_the_tasks_data_spec(tmp_path: Path) -> None:
    """run_config(task_data=…) is the spec a node checks its folder against, ahead of the task
    file the device may hold (which is used when the run carries none)."""
    digits = load_task("digits").data.model_dump(mode="json")
    run = fm.run_config(CFG, [1, 0, 1], str(tmp_path), task_data=digits)
    assert fm.task_data_spec(run, "fashion-mnist") == digits
    assert fm.task_data_spec({}, "fashion-mnist") == load_task("fashion-mnist").data.model_dump(
        mode="json"
    )


def _msg_as(type_index: int, client_index: int) -> object:
    """A train message whose config names the participant the ServerApp's node map says this
    node is in the run's task (type, index), as :meth:`VerifyingFedAvg.configure_train` sends."""
    msg = _train_msg()
    config = msg.content.config_records["config"]
    config[fm.MSG_TYPE_INDEX], config[fm.MSG_CLIENT_INDEX] = type_index, client_index
    return msg


def test_the_runs_type_not_the_node_configs_sets_the_attested_d(
    folders: dict[tuple[int, int], Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A device of two tasks is one node with one node config, but its type is the task's: the
    node config says type 1 (D = 50), the run's node map type 3 (D = 300). Holding 50 samples it
    refuses the round; the same folder in a run that makes it type 1 trains."""
    caplog.set_level(logging.ERROR, logger="mots.edge.client_app")
    small = {"data-fashion-mnist": str(folders[(0, 0)]), "type-index": 0, "client-index": 0}
    with pytest.raises(ValueError, match="does not fit task fashion-mnist"):
        client_app.app(_msg_as(2, 0), _context(RUN, **small))  # type: ignore[arg-type]
    assert "fewer than the 300 this participant attested" in caplog.text
    big = {"data-fashion-mnist": str(folders[(0, 0)]), "type-index": 2, "client-index": 0}
    _weights(client_app.app(_msg_as(0, 0), _context(RUN, **big)))  # type: ignore[arg-type]
