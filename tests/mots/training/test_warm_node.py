"""The warm edge node: its SuperExec executor, its arguments to Flower's SuperNode, the FAB cache,
and (against a real SuperNode) that no other process on the host can take the node's tasks."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mots.training import warm_node
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.warm_node import (
    ClientAppCache,
    WarmExecutor,
    supernode_args,
    task_poll_interval,
)


def _spec(task_id: int = 1, task_type: str = "flwr-clientapp", deps: bool = False) -> Any:
    from flwr.supercore.constant import TaskType

    return SimpleNamespace(
        task_id=task_id, task_type=TaskType(task_type), runtime_dependency_install=deps
    )


def test_task_poll_interval_reads_flowers_setting_with_its_bounds() -> None:
    assert task_poll_interval({}) == warm_node.DEFAULT_TASK_POLL_S == 1.0
    assert task_poll_interval({"FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.5"}) == 0.5
    for bad in ("0", "nan", "61", "fast"):
        with pytest.raises(ValueError, match="FLWR_SUPEREXEC_TASK_POLL_INTERVAL"):
            task_poll_interval({"FLWR_SUPEREXEC_TASK_POLL_INTERVAL": bad})


def test_supernode_runs_in_process_isolation_with_a_secret_of_its_own(tmp_path: Path) -> None:
    secret = tmp_path / "s.key"
    args = supernode_args(["--superlink", "h:1", "--port", "9"], secret)
    assert args == [
        "--superlink", "h:1", "--port", "9", "--isolation", "process",
        "--superexec-auth-secret-file", str(secret),
    ]  # fmt: skip
    assert supernode_args(["--isolation=process"], secret)[0] == "--isolation=process"
    with pytest.raises(ValueError, match="--isolation"):
        supernode_args(["--isolation", "subprocess"], secret)
    with pytest.raises(ValueError, match="--superexec-auth-secret-file"):
        supernode_args(["--superexec-auth-secret-file", "x"], secret)


def test_executor_offers_capacity_only_while_idle_and_runs_one_task_at_a_time() -> None:
    from flwr.supercore.constant import TaskType
    from flwr.supercore.superexec.executor import LaunchResultStatus

    release = threading.Event()
    ran: list[int] = []

    def task(spec: Any) -> None:
        ran.append(spec.task_id)
        if spec.task_id == 2:
            raise RuntimeError("a broken ClientApp")
        release.wait(10)

    ex = WarmExecutor(task)
    try:
        all_types = set(TaskType)
        assert ex.get_eligible_capacity(all_types) == ({TaskType.CLIENT_APP}, set())
        assert ex.launch(_spec(1)).status is LaunchResultStatus.ACCEPTED
        assert ex.get_eligible_capacity(all_types) == (set(), set())
        assert ex.launch(_spec(9)).status is LaunchResultStatus.CAPACITY_REJECTED
        release.set()
        ex.wait_for_capacity(timeout=10)
        assert ex.get_eligible_capacity(all_types)[0] == {TaskType.CLIENT_APP}
        assert ex.launch(_spec(2)).status is LaunchResultStatus.ACCEPTED  # raises inside
        ex.wait_for_capacity(timeout=10)
        deadline = time.monotonic() + 10
        while ex.completed < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ex.launch(_spec(3)).status is LaunchResultStatus.ACCEPTED  # the worker survived
        ex.wait_for_capacity(timeout=10)
        assert ran == [1, 2, 3]
        assert ex.launch(_spec(4, "flwr-serverapp")).status is LaunchResultStatus.FAILED
        assert ex.launch(_spec(5, deps=True)).status is LaunchResultStatus.FAILED
    finally:
        ex.close()
    assert ex.get_eligible_capacity(set(TaskType)) == (set(), set())


def test_a_new_fab_replaces_the_previous_fabs_modules(tmp_path: Path) -> None:
    """Flower's loader reuses a module by name: the cache drops the old FAB's before loading."""
    old = tmp_path / "fab-old"
    old.mkdir()
    (old / "mots_fab_probe.py").write_text("VERSION = 1\n")
    sys.path.insert(0, str(old))
    import mots_fab_probe  # type: ignore[import-not-found]

    assert mots_fab_probe.VERSION == 1
    cache = ClientAppCache()
    cache.project_dir, cache.fab_hash = old, "a" * 64
    cache._forget()
    assert "mots_fab_probe" not in sys.modules
    assert str(old) not in sys.path
    assert cache.fab_hash is None and cache.app is None


@pytest.mark.integration
def test_another_process_cannot_take_the_nodes_tasks(tmp_path: Path) -> None:
    """Attack: a process on the edge host asks the node's Runtime API for its ClientApp task (in
    Flower's subprocess isolation AcquireTask is not authenticated). The warm node's SuperExec
    signs AcquireTask with a per-start secret; an unsigned or wrongly signed request is refused."""
    import httpx
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.interceptors import SuperExecAuthHttpInterceptor
    from flwr.supercore.runtime import RuntimeHttpClient

    port = free_port_block(ports_needed(1))
    with LocalFederation(n_nodes=1, superlink_port=port, workdir=tmp_path / "fed") as fed:
        runtime = f"127.0.0.1:{fed.nodes[0]['port']}"
        for interceptors in ([], [SuperExecAuthHttpInterceptor(
            master_secret=b"guessed", protected_methods={"/flwr.proto.Runtime/AcquireTask"}
        )]):  # fmt: skip
            retry = warm_node.task_retry_invoker()  # Flower's would SIGINT this process on 401
            retry.max_tries = 1
            client = RuntimeHttpClient.from_server_address(
                server_address=runtime,
                insecure=True,
                root_certificates=None,
                interceptors=interceptors,
                retry_invoker=retry,
            )
            try:
                with pytest.raises(httpx.HTTPStatusError, match="401"):
                    client.AcquireTask(AcquireTaskRequest(supported_task_types=["flwr-clientapp"]))
            finally:
                client.close()


def test_the_supernodes_received_line_wakes_the_task_poll() -> None:
    import logging

    wake = threading.Event()
    handler = warm_node.ReceivedSignal(wake)
    flwr_log = logging.getLogger("flwr")
    flwr_log.addHandler(handler)
    try:
        flwr_log.info("Receiving: train message (ID: 1)")
        assert not wake.is_set()
        logging.getLogger("other").info("Received successfully")
        assert not wake.is_set()
        flwr_log.info("Received successfully")
        assert wake.is_set()
    finally:
        flwr_log.removeHandler(handler)
