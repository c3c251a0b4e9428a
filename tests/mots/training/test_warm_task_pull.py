"""A warm node's task gives up on message objects that never arrive (mots.training.warm_node).

Found by the SuperLink restart fault round (tests/containers/faults.py): SuperNodes that were
pulling a message when its run ended or the SuperLink restarted kept a task whose objects never
came; Flower's pull waits up to 2 h, the node's one warm worker with it, and the next run's train
message was "Received successfully" but never run (py-spy: the worker in ``pull_objects``). The
pull is now bounded, so the task fails and the worker takes the next one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from flwr.proto.message_pb2 import ObjectTree
from flwr.supercore.inflatable import inflatable_utils
from flwr.supernode.runtime import run_clientapp

from mots.training import warm_node


def _never(object_id: str) -> bytes:
    raise inflatable_utils.ObjectUnavailableError(object_id)


def test_a_task_input_that_never_arrives_fails_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        run_clientapp,
        "pull_and_inflate_object_from_tree",
        run_clientapp.pull_and_inflate_object_from_tree,
    )  # restored after the test
    warm_node.bound_task_input_pull(max_time=0.5)
    tree = ObjectTree(object_id="ab" * 32)
    started = time.monotonic()
    with pytest.raises(inflatable_utils.ObjectPullError):
        run_clientapp.pull_and_inflate_object_from_tree(tree, _never, lambda _: None)
    assert time.monotonic() - started < 10  # Flower's own default: up to 7,200 s


def test_the_warm_node_bounds_the_pull_below_flowers_default() -> None:
    from flwr.supercore.constant import PULL_MAX_TIME

    assert 0 < warm_node.TASK_INPUT_PULL_MAX_S < PULL_MAX_TIME
    assert "bound_task_input_pull()" in Path(warm_node.__file__).read_text()
