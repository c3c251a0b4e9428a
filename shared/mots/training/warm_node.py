"""The edge node as one warm process: Flower's SuperNode and a SuperExec whose executor runs each
ClientApp task on a thread of that process, with Flower, torch and the ClientApp's imports loaded
before the first task.

Flower 1.42's SuperExec starts a fresh ``flwr-clientapp`` process for every message (its
``SubprocessExecutor``); Flower's warm pools (``warm_executor_pool.py``) exist only for Kubernetes
Pods and only for the ``flwr-agentapp``/``flwr-model``/``flwr-connector`` task types, not for
ClientApps. Here the SuperNode runs in Flower's ``process`` isolation (it starts no SuperExec of
its own) and this module supplies the SuperExec through Flower's own interfaces: an ``Executor``
(:class:`WarmExecutor`: capacity one task at a time, ``launch`` hands the task to a worker thread
that is already warm) driven by Flower's ``AutoExecPlugin`` and ``AcquireTask`` polling of the
node's Runtime API, signed with a per-start SuperExec auth secret (so nothing else on the host can
take the node's tasks). Each task is then what ``flwr-clientapp`` does (pull the message, context,
run and FAB with the task's token; install and load the FAB's ClientApp; run it; push the reply and
the task's status), reusing Flower's functions, without the process start, the imports or the FAB
load when the FAB is the same as last time. TLS to the SuperLink, SuperNode authentication and the
server's verification of every update are Flower's and the ServerApp's, unchanged.

Run: ``python -m mots.training.warm_node [--fleet-pull-interval S] <flower-supernode arguments>``.
Without ``--fleet-pull-interval`` (a fixed sleep after an empty Fleet pull) the pull sleeps 3 s
while the node is idle and a quarter second while it is in a run (:mod:`mots.training.fleet_pull`).
``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` (Flower's SuperExec setting) sets how often the Runtime API
is asked for a task (default here :data:`DEFAULT_TASK_POLL_S`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import secrets
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mots.training.fleet_pull import PullPacer, set_fleet_pull_interval
from mots.training.residency import release_file_pages
from mots.training.task_data import pop_option, with_task_data

log = logging.getLogger(__name__)

TASK_POLL_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"
DEFAULT_TASK_POLL_S = 1.0
"""Seconds between ``AcquireTask`` polls of the node's own Runtime API (Flower's default). The
poll is also woken at once when the SuperNode logs that it received a message
(:class:`ReceivedSignal`), so a task does not wait for the interval; polling at 0.2 s instead cost
an idle node 0.024 CPU-seconds per second."""
RECEIVED_LINE = "Received successfully"
"""What Flower's SuperNode logs once a pulled message and its objects are stored (its task made)."""
DEFAULT_RUNTIME_PORT = 9094
READY_LINE = "warm node: preloaded"
"""Logged once torch and the ClientApp's imports are loaded (the node's first task waits for it)."""
_AUTH_METHODS = frozenset({"/flwr.proto.Runtime/AcquireTask"})
ADMISSION_RETRY_MAX_S = 5.0
"""Longest wait between two ``ActivateNode`` calls while the SuperLink does not admit the node's
key yet (:func:`wait_for_admission`): a chosen node connects within this of its registration."""


def preload() -> None:
    """Import what every ClientApp task needs (torch, the local update, Flower's task code), so the
    first round pays none of it."""
    import flwr.clientapp
    import flwr.supernode.runtime.run_clientapp  # noqa: F401
    import torch  # noqa: F401

    import mots.training.edge_trainer
    import mots.training.flower_messages  # noqa: F401
    from mots.training import datasets, local, models  # noqa: F401

    with contextlib.suppress(ImportError):  # the edge's own app, when installed beside
        import edge.flower_app.client_app  # noqa: F401


def task_poll_interval(env: dict[str, str] | None = None) -> float:
    """``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` (Flower's bounds: 0.01-60 s), else the default."""
    raw = (os.environ if env is None else env).get(TASK_POLL_ENV)
    if raw is None:
        return DEFAULT_TASK_POLL_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0.01 <= value <= 60.0:
        raise ValueError(f"{TASK_POLL_ENV}: must be a number of seconds in 0.01..60, got {raw!r}")
    return value


class ClientAppCache:
    """The FAB's ClientApp, installed and loaded once per FAB hash (Flower's loader keys modules by
    name only, so a new FAB's modules replace the previous FAB's)."""

    def __init__(self) -> None:
        self.fab_hash: str | None = None
        self.project_dir: Path | None = None
        self.app: Any = None
        self.loads = 0

    def get(self, run: Any, fab: Any) -> Any:
        """The ClientApp of ``run``'s FAB (installing and loading it when the hash is new)."""
        if fab.hash_str == self.fab_hash:
            return self.app
        from flwr.cli.install import install_from_fab
        from flwr.clientapp.utils import get_load_client_app_fn
        from flwr.common.config import get_project_dir

        install_from_fab(fab.content, skip_prompt=True)
        self._forget()
        load = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)
        self.app = load(run.fab_id, run.fab_version, fab.hash_str)
        self.project_dir = Path(get_project_dir(run.fab_id, run.fab_version, fab.hash_str))
        self.fab_hash = fab.hash_str
        self.loads += 1
        return self.app

    def _forget(self) -> None:
        """Drop the previous FAB's modules and its directory on sys.path."""
        if self.project_dir is None:
            return
        root = str(self.project_dir.absolute())
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) or ""
            if path.startswith(root + os.sep):
                del sys.modules[name]
        with contextlib.suppress(ValueError):
            sys.path.remove(root)
        self.fab_hash, self.project_dir, self.app = None, None, None


TASK_INPUT_PULL_MAX_S = 120.0
"""Longest a task waits for its message's objects in the node's own store. Flower waits up to 2 h
(``PULL_MAX_TIME``): a message whose objects never arrive (its run ended, or the SuperLink
restarted, while the SuperNode pulled it) held the node's one warm worker that long, and the
node sent no reply in any later run (found by the SuperLink restart fault round: nodes idle, the
next run's train message "Received successfully" but never run). ``flwr-clientapp`` processes are
killed with their task; a thread is not, so the pull is bounded instead."""


def bound_task_input_pull(max_time: float = TASK_INPUT_PULL_MAX_S) -> None:
    """Make ``pull_task_input`` give up after ``max_time`` s (ObjectPullError: the task fails)."""
    import functools

    from flwr.supercore.inflatable import inflatable_utils
    from flwr.supernode.runtime import run_clientapp

    pull = inflatable_utils.pull_and_inflate_object_from_tree
    run_clientapp.pull_and_inflate_object_from_tree = functools.partial(pull, max_time=max_time)  # type: ignore[attr-defined]


def run_clientapp_task(spec: Any, apps: ClientAppCache) -> str:
    """One ClientApp task as ``flwr-clientapp`` runs it, in this process: pull its input with the
    task's token, run the FAB's ClientApp, push the reply (an error reply when it raised) and the
    task's final status. Returns that status."""
    from flwr.app import Context, Error, Message
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supernode.runtime.run_clientapp import (
        pull_task_input,
        push_message,
        push_task_output,
    )

    retry = task_retry_invoker()
    client = RuntimeHttpClient.from_server_address(
        server_address=spec.runtime_api_address,
        insecure=spec.insecure,
        root_certificates=_read(spec.root_certificates_path),
        interceptors=[
            RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
            RuntimeTokenHttpInterceptor(spec.token),
        ],
        retry_invoker=retry,
    )
    heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
    context: Context | None = None
    message: Message | None = None
    reply: Message | None = None
    status, details = SubStatus.FAILED, "ClientApp task failed due to unknown reason"
    try:
        heartbeat.start()
        message, context, run, fab = pull_task_input(client)
        reply = apps.get(run, fab)(message=message, context=context)
        status, details = SubStatus.COMPLETED, ""
    except Exception as ex:  # what flwr-clientapp does: an error reply, the task failed
        log.exception("ClientApp task %s raised", spec.task_id)
        reason = f"{type(ex)}:<'{ex}'>"
        details = reason
        if message is not None:
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                            reply_to=message)  # fmt: skip
    finally:
        if reply is not None and context is not None:
            try:
                push_message(client, reply, context)
            except Exception:  # the SuperNode then times the task out, as for a dead process
                log.exception("pushing the reply of task %s failed", spec.task_id)
        retry.max_tries = 1
        push_task_output(client=client, context=context, sub_status=status, details=details)
        if heartbeat.is_running:
            heartbeat.stop()
        client.close()
    return str(status)


def task_retry_invoker() -> Any:
    """Flower's Runtime API retry policy, except that a refused token (401) fails the task:
    Flower's policy SIGINTs its own process then, which ends a one-task ``flwr-clientapp`` but would
    end the whole node here."""
    import httpx
    from flwr.supercore.retry import make_simple_http_retry_invoker

    retry = make_simple_http_retry_invoker()
    flower_giveup = retry.should_giveup

    def should_giveup(exc: Exception) -> bool:
        if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 401:
            return True
        return bool(flower_giveup(exc)) if flower_giveup is not None else False

    retry.should_giveup = should_giveup
    return retry


def _read(path: str | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


class WarmExecutor:
    """A Flower SuperExec ``Executor`` whose TaskExecutor is a thread of this process, started
    ahead and kept: one ClientApp task at a time (capacity is offered only while it is idle)."""

    def __init__(self, run_task: Callable[[Any], object]) -> None:
        self._run_task = run_task
        self._tasks: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False
        self.completed = 0
        self._worker = self._start_worker()

    def _start_worker(self) -> threading.Thread:
        worker = threading.Thread(target=self._work, name="warm-executor", daemon=True)
        worker.start()
        return worker

    def _work(self) -> None:
        while True:
            spec = self._tasks.get()
            if spec is None:
                return
            try:
                self._run_task(spec)
            except Exception:  # a broken task must not take the executor down
                log.exception("warm executor: task %s failed", getattr(spec, "task_id", "?"))
            finally:
                self.completed += 1
                self._idle.set()

    def get_eligible_capacity(
        self,
        supported_task_types: set[Any],
        *,
        insecure: bool = False,
        root_certificates_path: str | None = None,
    ) -> tuple[set[Any], set[str]]:
        """ClientApp tasks while the worker is idle, nothing while it runs one."""
        from flwr.supercore.constant import TaskType

        del insecure, root_certificates_path
        if self._closed or not self._idle.is_set():
            return set(), set()
        return set(supported_task_types) & {TaskType.CLIENT_APP}, set()

    def wait_for_capacity(
        self,
        task_type: Any = None,
        *,
        fab_hash: str | None = None,
        insecure: bool = False,
        root_certificates_path: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """Block until the worker is idle (or ``timeout``)."""
        del task_type, fab_hash, insecure, root_certificates_path
        self._idle.wait(timeout)

    def launch(self, spec: Any) -> Any:
        """Hand the task to the warm worker; refused while it is busy or for other task types."""
        from flwr.supercore.constant import TaskType
        from flwr.supercore.superexec.executor import LaunchResult

        if spec.task_type != TaskType.CLIENT_APP:
            return LaunchResult.failed(f"the warm executor runs ClientApps, not {spec.task_type}")
        if spec.runtime_dependency_install:
            return LaunchResult.failed("runtime dependency installation is not supported here")
        if self._closed or not self._idle.is_set():
            return LaunchResult.capacity_rejected("the warm executor is running a task")
        self._idle.clear()
        self._tasks.put(spec)
        return LaunchResult.accepted()

    def reconcile(self) -> None:
        """Restart the worker thread if it ever ended."""
        if not self._closed and not self._worker.is_alive():
            self._worker = self._start_worker()
            self._idle.set()

    def close(self) -> None:
        """Stop taking tasks; the worker ends after the task it runs."""
        self._closed = True
        with contextlib.suppress(queue.Full):
            self._tasks.put_nowait(None)


class ReceivedSignal(logging.Handler):
    """Sets ``event`` when Flower's SuperNode logs that it stored a pulled message: the SuperExec
    loop asks for the task then instead of at its next poll (and ``pacer`` hears the node is in a
    run)."""

    def __init__(self, event: threading.Event, pacer: PullPacer | None = None) -> None:
        super().__init__(level=logging.INFO)
        self.event = event
        self.pacer = pacer

    def emit(self, record: logging.LogRecord) -> None:
        """Wake the loop on the SuperNode's line; ignore every other record."""
        if record.name == "flwr" and str(record.msg).startswith(RECEIVED_LINE):
            if self.pacer is not None:
                self.pacer.active()
            self.event.set()


def _listening(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def superexec_loop(
    address: str,
    secret: bytes,
    executor: WarmExecutor,
    poll_s: float,
    stop: threading.Event,
    wake: threading.Event | None = None,
) -> None:
    """Flower's SuperExec main loop (``run_superexec``) with this executor: ask the Runtime API
    for a ClientApp task whenever the executor is idle, launch it through ``AutoExecPlugin``."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType
    from flwr.supercore.interceptors import (
        RuntimeVersionHttpInterceptor,
        SuperExecAuthHttpInterceptor,
    )
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.superexec.plugin import AutoExecPlugin

    host, _, port = address.rpartition(":")
    while not stop.is_set() and not _listening(host, int(port)):
        stop.wait(0.1)
    client = RuntimeHttpClient.from_server_address(
        server_address=address,
        insecure=True,
        root_certificates=None,
        interceptors=[
            RuntimeVersionHttpInterceptor(component_name="SuperExec"),
            SuperExecAuthHttpInterceptor(master_secret=secret, protected_methods=_AUTH_METHODS),
        ],
        retry_invoker=make_simple_http_retry_invoker(),
    )
    plugin = AutoExecPlugin(
        runtime_api_address=address,
        insecure=True,
        root_certificates_path=None,
        runtime_dependency_install=False,
        executor=executor,
    )
    try:
        while not stop.is_set():
            executor.reconcile()
            types, fabs = executor.get_eligible_capacity({TaskType.CLIENT_APP})
            if not types:
                executor.wait_for_capacity(timeout=1.0)
                continue
            try:
                res = client.AcquireTask(
                    AcquireTaskRequest(supported_task_types=types, agentapp_fab_hashes=fabs)
                )
            except Exception as err:  # the SuperNode restarting or stopping: try again
                log.warning("AcquireTask failed: %s", err)
                stop.wait(1.0)
                continue
            if res.HasField("task") and res.token:
                result = plugin.launch_task(token=res.token, task=res.task)
                if str(result.status) != "accepted":
                    log.error("task %s not launched: %s", res.task.task_id, result.message)
                continue
            if wake is None:
                stop.wait(poll_s)
            else:  # the SuperNode's "received" line, stop, or the poll interval
                wake.wait(poll_s)
                wake.clear()
    finally:
        client.close()
        executor.close()


def not_admitted(exc: BaseException) -> bool:
    """Whether ``exc`` is the SuperLink refusing to activate this node: its key is not (yet)
    registered, or the SuperLink still counts the node's previous connection as online."""
    import httpx
    from flwr.supercore.error import ApiErrorCode, FlowerError

    if not isinstance(exc, httpx.HTTPStatusError):
        return False
    error = FlowerError.from_json(exc.response.text)
    return error is not None and error.code == ApiErrorCode.FLEET_NODE_ACTIVATION_FAILED


def wait_for_admission(max_delay_s: float = ADMISSION_RETRY_MAX_S) -> None:
    """Make the SuperNode wait until the SuperLink admits its key, asking again every
    ``max_delay_s`` s at most, instead of exiting with Flower's code 305.

    A deployed edge node starts before its key is registered: the orchestration registers the
    round's participants' keys when training starts (and unregisters the others), and a
    restarted node is still "online" until the SuperLink's heartbeat patience ends. Flower 1.42
    gives up on the first refused ``ActivateNode``; the container then restarts without pause
    (podman) or backs off up to 5 minutes (Kubernetes' CrashLoopBackOff), longer than the
    ServerApp waits for a chosen node (``node-timeout``, 180 s), so the node missed the round it
    was chosen for. Flower's retry policy is kept for every other error (the connection's
    retry invoker is Flower's own, with this one refusal made retryable and the delay capped)."""
    import flwr.supernode.fleet_http_connection as fleet
    from flwr.supercore.retry import exponential, make_simple_http_retry_invoker

    if not 0.1 <= max_delay_s <= 60.0:
        raise ValueError(f"admission retry: must be in 0.1..60 s, got {max_delay_s}")

    def make_retry_invoker() -> Any:
        retry = make_simple_http_retry_invoker()
        flower_giveup = retry.should_giveup

        def should_giveup(exc: Exception) -> bool:
            if not_admitted(exc):
                log.info("the SuperLink has not admitted this node's key yet: asking again")
                return False
            return bool(flower_giveup(exc)) if flower_giveup is not None else False

        retry.should_giveup = should_giveup
        retry.wait_gen_factory = lambda: exponential(max_delay=max_delay_s)  # type: ignore[arg-type]
        return retry

    setattr(fleet, "make_simple_http_retry_invoker", make_retry_invoker)  # noqa: B010


def _option(argv: list[str], name: str, default: str | None = None) -> str | None:
    """The value of ``name`` in argv (``--x v`` or ``--x=v``), else ``default``."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def supernode_args(argv: Sequence[str], secret_file: Path) -> list[str]:
    """``flower-supernode`` arguments for the warm node: process isolation (this process is the
    SuperExec) and the SuperExec auth secret; refuses another isolation or secret."""
    args = list(argv)
    isolation = _option(args, "--isolation")
    if isolation not in (None, "process"):
        raise ValueError(f"--isolation: the warm node runs its own SuperExec, got {isolation!r}")
    if _option(args, "--superexec-auth-secret-file") is not None:
        raise ValueError("--superexec-auth-secret-file: the warm node makes its own per start")
    if isolation is None:
        args += ["--isolation", "process"]
    return [*args, "--superexec-auth-secret-file", str(secret_file)]


def _secret_file() -> tuple[Path, bytes]:
    """A fresh 32-byte secret in a private temporary file (removed once the SuperNode read it)."""
    secret = secrets.token_bytes(32)
    fd, name = tempfile.mkstemp(prefix="mots-superexec-", suffix=".key")
    with os.fdopen(fd, "wb") as f:
        f.write(secret)
    return Path(name), secret


def main(argv: Sequence[str] | None = None) -> None:
    """Start the warm node: preload, the SuperExec thread, then Flower's SuperNode (this thread)."""
    args = list(sys.argv[1:] if argv is None else argv)
    pull = pop_option(args, "--fleet-pull-interval")
    poll_s = task_poll_interval()
    secret_path, secret = _secret_file()
    try:
        flower_args = supernode_args(with_task_data(args), secret_path)
    except ValueError as err:
        secret_path.unlink(missing_ok=True)
        raise SystemExit(str(err)) from err
    pacer = None if pull is not None else PullPacer()
    set_fleet_pull_interval(pacer if pacer is not None else float(str(pull)))
    wait_for_admission()
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)  # Flower logs through its own handler; the root stays unconfigured
    log.setLevel(logging.INFO)
    log.propagate = False
    host = _option(flower_args, "--host", "127.0.0.1") or "127.0.0.1"
    port = int(_option(flower_args, "--port", str(DEFAULT_RUNTIME_PORT)) or DEFAULT_RUNTIME_PORT)
    apps = ClientAppCache()
    bound_task_input_pull()
    executor = WarmExecutor(lambda spec: run_clientapp_task(spec, apps))
    stop = threading.Event()
    wake = threading.Event()
    logging.getLogger("flwr").addHandler(ReceivedSignal(wake, pacer))

    def _superexec() -> None:  # preloads while the SuperNode connects, then takes tasks
        try:
            started = time.perf_counter()
            preload()
            released = release_file_pages()  # the imports' code pages, not used again
            log.info(
                "%s in %.1f s (%.0f MiB of file-backed pages released)",
                READY_LINE, time.perf_counter() - started, released / 2**20,
            )  # fmt: skip
            superexec_loop(f"{host}:{port}", secret, executor, poll_s, stop, wake)
        finally:
            secret_path.unlink(missing_ok=True)

    threading.Thread(target=_superexec, name="warm-superexec", daemon=True).start()
    threading.Thread(
        target=_forget_secret_when_read, args=(secret_path, host, port), daemon=True
    ).start()
    sys.argv = ["flower-supernode", *flower_args]
    from flwr.supernode.cli import flower_supernode

    try:
        flower_supernode()
    finally:
        stop.set()
        wake.set()
        secret_path.unlink(missing_ok=True)


def _forget_secret_when_read(path: Path, host: str, port: int) -> None:
    """The SuperNode reads the secret file before its Runtime API listens: remove it then."""
    deadline = time.monotonic() + 300.0
    while time.monotonic() < deadline and not _listening(host, port):
        time.sleep(0.2)
    path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
