"""A local Flower federation: one SuperLink and one SuperNode per edge device, as processes.

By default the federation is encrypted and authenticated as a deployment is: a CA and a server
certificate are made for each run (TLS on every API), each SuperNode gets its own key pair, and
the SuperLink (:mod:`mots.training.superlink`: the Fleet API on a port of its own, the Control
and Runtime APIs on ``superlink_port``) runs with ``--enable-supernode-auth`` and admits exactly the
keys registered through its Control API. Registration returns each node's id; :meth:`node_map`
(node id → (type, index)) is what the ServerApp trusts. ``secure=False`` (no TLS, no
authentication) exists only to measure what security costs.

Each SuperNode is tagged in its node config with its client type (``type-index``, ``client-type``)
and its index within the type (``client-index``: the data partition it holds), and by default
gets a resident trainer (:mod:`mots.training.edge_trainer`) on a Unix socket. Every process
starts in its own session; :meth:`LocalFederation.stop` signals whole process groups and every
descendant found (SuperExec, ServerApp and ClientApp children included), so nothing strays.
The state file ``<workdir>/federation.json`` lets another process (``mots federation down``) stop it.
The processes are supervised by :class:`mots.training.processes.ProcessSupervisor`;
:class:`mots.training.external_superlink.ExternalSuperLink` stands for a SuperLink started elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any

from mots.training import readiness
from mots.training.external_superlink import (
    CONNECTION,
    ExternalSuperLink,
    Federation,
    parse_address,
    write_connection,
)
from mots.training.pki import NodeKey, TlsFiles, make_node_key, make_tls
from mots.training.processes import (
    SUPERNODE_START_ATTEMPTS,
    FederationError,
    PlatformFault,
    ProcessInfo,
    ProcessSupervisor,
    alive,
    bin_dir,
    descendants,
    free_port_block,
    listening,
    port_free,
    ports_needed,
    reap_strays,
    rss_mb,
    strays,
)
from mots.training.task_data import node_folders
from mots.training.verification import VerificationPolicy

__all__ = [
    "CONNECTION",
    "LAYOUTS",
    "STATE_FILE",
    "SUPERNODE_START_ATTEMPTS",
    "ExternalSuperLink",
    "Federation",
    "FederationError",
    "LocalFederation",
    "PlatformFault",
    "ProcessInfo",
    "alive",
    "descendants",
    "free_port_block",
    "parse_address",
    "ports_needed",
    "reap_strays",
    "strays",
    "write_connection",
]
"""The names this module has always offered; those of the process and external-SuperLink roles
live in :mod:`mots.training.processes` and :mod:`mots.training.external_superlink`."""

log = logging.getLogger(__name__)
STATE_FILE = "federation.json"


LAYOUTS = ("warm", "subprocess")
"""How an edge node runs its ClientApps: ``warm`` (one process per node, :mod:`mots.training.
warm_node`: the SuperNode with an in-process SuperExec that keeps torch and the ClientApp loaded)
or ``subprocess`` (Flower's own: SuperNode, SuperExec, one ``flwr-clientapp`` process per message,
and a resident trainer per node)."""


class LocalFederation(ProcessSupervisor):
    """SuperLink + ``n_nodes`` SuperNodes (+ resident trainers) on this machine.

    Ports: ``superlink_port`` serves the Control and Runtime APIs (:attr:`address`), the next
    ``n_nodes`` ports the SuperNodes' own runtime APIs, and ``superlink_port + n_nodes + 1`` the
    Fleet API (:attr:`fleet_address`): ``n_nodes + 2`` ports in all (:func:`ports_needed`).
    ``trainer_argv`` replaces a node's resident trainer command (tests run attacking trainers).
    """

    def __init__(
        self,
        n_nodes: int = 20,
        node_types: Sequence[int] | None = None,
        superlink_port: int = 9500,
        workdir: str | Path | None = None,
        *,
        type_names: Sequence[str] | None = None,
        trainer: bool = True,
        start_timeout: float = 120.0,
        secure: bool = True,
        policy: VerificationPolicy | None = None,
        trainer_argv: Mapping[int, Sequence[str]] | None = None,
        layout: str = "warm",
        fork: bool = False,
        task_data: Mapping[str, str | Path] | None = None,
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if node_types is None:
            node_types = [0] * 10 + [1] * 5 + [2] * 5 if n_nodes == 20 else [0] * n_nodes
        node_types = [int(t) for t in node_types]
        if len(node_types) != n_nodes:
            raise ValueError(
                f"node_types must have n_nodes ({n_nodes}) entries, got {len(node_types)}"
            )
        if n_nodes < 1 or any(t < 0 for t in node_types):
            raise ValueError("node_types: need ≥ 1 node, every type index ≥ 0")
        if not 1024 <= superlink_port <= 65535 - ports_needed(n_nodes) + 1:
            raise ValueError(
                f"superlink_port must leave room for {n_nodes} node ports, got {superlink_port}"
            )
        self.n_nodes = n_nodes
        self.node_types = node_types
        n_types = max(node_types) + 1
        self.type_names = (
            list(type_names)
            if type_names is not None
            else [f"type-{i + 1}" for i in range(n_types)]
        )
        self.superlink_port = superlink_port
        self._fleet_port = superlink_port + n_nodes + 1
        super().__init__(
            Path(workdir).resolve()
            if workdir is not None
            else Path(tempfile.mkdtemp(prefix="mots-fed-")),
            start_timeout,
        )
        self.trainer = trainer
        self.layout = layout
        self.fork = fork and layout == "warm"
        """Warm nodes forked from one template that imported Flower and torch once
        (:mod:`mots.training.warm_fork`): a host running many nodes starts them in seconds."""
        self._fork_socket: Path | None = None
        self.warm_options: list[str] = []
        """Extra options of :mod:`mots.training.warm_node` (e.g. ``--fleet-pull-interval``)."""
        self.secure = secure
        self.policy = policy or VerificationPolicy()
        self.trainer_argv = {int(k): list(v) for k, v in (trainer_argv or {}).items()}
        self.task_data = {t: str(p) for t, p in (task_data or {}).items()}  # task → split's folders
        counters: dict[int, int] = {}
        self.nodes: list[dict[str, Any]] = []
        for n, t in enumerate(node_types):
            j = counters.get(t, 0)
            counters[t] = j + 1
            self.nodes.append(
                {
                    "node": n,
                    "type_index": t,
                    "client_index": j,
                    "port": superlink_port + 1 + n,
                    "node_id": None,
                }
            )

    # -- paths -------------------------------------------------------------------------------------
    @property
    def flwr_home(self) -> Path:
        """FLWR_HOME of the launcher (`flwr run`): holds the connection to this SuperLink."""
        return self.workdir / "flwr-home"

    @property
    def address(self) -> str:
        """host:port of the SuperLink's Control (and Runtime) API."""
        return f"127.0.0.1:{self.superlink_port}"

    @property
    def fleet_port(self) -> int:
        """The Fleet API's port (the only one the SuperNodes reach)."""
        return self._fleet_port

    @property
    def fleet_address(self) -> str:
        """host:port of the SuperLink's Fleet API."""
        return f"127.0.0.1:{self.fleet_port}"

    @property
    def tls(self) -> TlsFiles:
        """This run's CA and SuperLink certificate (made by :meth:`start`)."""
        d = self.workdir / "tls"
        return TlsFiles(d / "ca.crt", d / "server.crt", d / "server.key")

    @property
    def ca_cert(self) -> Path | None:
        """The CA certificate that verifies the SuperLink (None when not secure)."""
        return self.tls.ca_cert if self.secure else None

    def node_dir(self, n: int) -> Path:
        """Node ``n``'s own directory (its FLWR_HOME and its key)."""
        return self.workdir / "nodes" / f"node-{n:02d}"

    def node_key_path(self, n: int) -> Path:
        """Where node ``n``'s private key lies (OpenSSH, 0600)."""
        return self.node_dir(n) / "auth" / "supernode.key"

    def _socket_path(self, n: int) -> Path:
        # Unix socket paths are limited to 107 bytes: keep them short; the work directory's
        # digest keeps two federations on one port (one stopping as the other starts) apart.
        tag = hashlib.sha1(str(self.workdir).encode()).hexdigest()[:8]
        base = Path(tempfile.gettempdir()) / f"mots-{self.superlink_port}-{tag}"
        return base / f"node-{n:02d}.sock"

    def node_config(self, n: int) -> str:
        """The ``--node-config`` of node ``n``: type and index (and the trainer's socket)."""
        node = self.nodes[n]
        pairs = [
            f'client-type="{self.type_names[node["type_index"]]}"',
            f"type-index={node['type_index']}",
            f"client-index={node['client_index']}",
        ]
        if self.has_trainer(n):
            pairs.append(f'trainer-socket="{self._socket_path(n)}"')
        if self.task_data:  # each device's own folder per task (mots data split's layout)
            pairs.append(node_folders(self.task_data, node["type_index"], node["client_index"]))
        return " ".join(pairs)

    def has_trainer(self, n: int) -> bool:
        """Whether node ``n`` trains through a trainer process of its own: every node in the
        ``subprocess`` layout (with ``trainer``), only nodes given a ``trainer_argv`` (the
        attacking trainers of tests) in the ``warm`` layout, whose SuperNode process trains."""
        return self.trainer and (self.layout == "subprocess" or n in self.trainer_argv)

    def node_map(self) -> dict[int, tuple[int, int]]:
        """Flower node id → (type index, client index) of every node, from its registered key
        (secure) or, without authentication, from the id the node was given at start."""
        if not self.secure:
            self._read_insecure_ids()
        return {
            int(n["node_id"]): (int(n["type_index"]), int(n["client_index"]))
            for n in self.nodes
            if n["node_id"] is not None
        }

    def participant_keys(self) -> dict[tuple[int, int], bytes]:
        """(type index, client index) → the node's public key (PEM), as a market would hold it."""
        from mots.training.pki import load_node_key

        return {
            (int(n["type_index"]), int(n["client_index"])): load_node_key(
                self.node_key_path(int(n["node"]))
            ).public_pem
            for n in self.nodes
        }

    def _save(self) -> None:
        state = {
            "superlink_port": self.superlink_port,
            "node_types": self.node_types,
            "type_names": self.type_names,
            "trainer": self.trainer,
            "layout": self.layout,
            "task_data": self.task_data,
            "secure": self.secure,
            "policy": self.policy.model_dump(mode="json"),
            "nodes": self.nodes,
            "processes": [asdict(p) for p in self.processes],
        }
        (self.workdir / STATE_FILE).write_text(json.dumps(state, indent=1))

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> LocalFederation:
        """Start SuperLink, register the nodes' keys, start trainers and SuperNodes; return once
        every SuperNode has connected. A federation left in the same workdir by a process that
        was killed is reaped first (:func:`reap_strays`)."""
        reaped = reap_strays(self.workdir)
        if reaped:
            log.warning(
                "reaped %d processes of a stale federation in %s", len(reaped), self.workdir
            )
        ports = [self.superlink_port, self.fleet_port] + [n["port"] for n in self.nodes]
        deadline = time.monotonic() + (10.0 if reaped else 0.0)
        while (busy := [p for p in ports if not port_free(p)]) and time.monotonic() < deadline:
            time.sleep(0.2)
        if busy:
            raise FederationError(
                f"superlink_port: ports {busy} are in use; pick another superlink_port"
            )
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            if self.fork:
                self._start_template()
            self._start_superlink()
            if self.secure:
                self._register_nodes()
            if self._fork_socket is not None:
                template = functools.partial(readiness.template_ready, self)
                self._wait(template, "the warm nodes' template", watch=["template"])
            for n in range(self.n_nodes):
                if self.has_trainer(n):
                    self._start_trainer(n)
            for n in range(self.n_nodes):
                key = self.node_key_path(n) if self.secure else None
                self.spawn_supernode(f"supernode-{n:02d}", n, self.node_config(n), key)
            self._wait(self._all_registered, f"{self.n_nodes} SuperNodes to register")
            if any(self.has_trainer(n) for n in range(self.n_nodes)):
                self._wait(
                    lambda: all(
                        self._socket_path(n).exists()
                        for n in range(self.n_nodes)
                        if self.has_trainer(n)
                    ),
                    "the resident trainers to listen",
                )
            self._save()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_template(self) -> None:
        """The process that imports a warm node's modules once and forks every node."""
        from mots.training.warm_fork import socket_path

        self._fork_socket = socket_path()
        argv = [sys.executable, "-m", "mots.training.warm_fork", "--socket", str(self._fork_socket)]
        self._spawn("template", "template", argv, self.workdir / "template-home")

    def _start_superlink(self) -> None:
        """The SuperLink (TLS and node authentication when secure); waits until it listens."""
        argv = [
            sys.executable,
            "-m",
            "mots.training.superlink",
            "--fleet-host",
            "127.0.0.1",
            "--fleet-port",
            str(self.fleet_port),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.superlink_port),
            "--disable-runtime-dependency-installation",
        ]
        if self.secure:
            tls = make_tls(self.workdir / "tls", ["127.0.0.1", "localhost"])
            argv += ["--enable-supernode-auth", *tls.superlink_args()]
        else:
            argv += ["--insecure"]
        write_connection(self.flwr_home, self.address, self.ca_cert)
        self._spawn("superlink", "superlink", argv, self.workdir / "superlink-home")
        self._wait(
            lambda: listening(self.superlink_port) and listening(self.fleet_port),
            "SuperLink to listen on " + self.address,
        )

    def _register_nodes(self) -> None:
        """A key pair per node, each public key registered through the Control API."""
        from mots.training.control import ControlClient

        keys: list[NodeKey] = [make_node_key(self.node_key_path(n)) for n in range(self.n_nodes)]
        with ControlClient(self.address, self.ca_cert) as control:
            for node, key in zip(self.nodes, keys, strict=True):
                node["node_id"] = control.register(key.public_pem, name=f"node-{node['node']:02d}")
                node["key_sha256"] = key.fingerprint

    def _start_trainer(self, n: int) -> None:
        sock = self._socket_path(n)
        sock.parent.mkdir(parents=True, exist_ok=True)
        default = [sys.executable, "-m", "mots.training.edge_trainer"]
        argv = [*self.trainer_argv.get(n, default), "--socket", str(sock)]
        self._spawn("trainer", f"trainer-{n:02d}", argv, self.node_dir(n))

    def spawn_supernode(
        self, name: str, n: int, node_config: str, private_key: Path | None, port: int | None = None
    ) -> ProcessInfo:
        """Start a SuperNode against this SuperLink's Fleet API (TLS verified by the CA and,
        with ``private_key``, signing as that key). Tests start extra (attacking) nodes with it."""
        warm = (
            ["mots.training.warm_node"]
            if self._fork_socket is None
            else ["mots.training.warm_fork", "--socket", str(self._fork_socket), "--node"]
        )
        command = (
            [sys.executable, "-m", *warm, *self.warm_options]
            if self.layout == "warm"
            else [str(bin_dir() / "flower-supernode")]
        )
        argv = [
            *command,
            "--superlink",
            self.fleet_address,
            "--port",
            str(port if port is not None else self.nodes[n]["port"]),
            "--node-config",
            node_config,
        ]
        if self.secure:
            argv += ["--root-certificates", str(self.tls.ca_cert)]
        else:
            argv += ["--insecure"]
        if private_key is not None:
            argv += ["--auth-supernode-private-key", str(private_key)]
        home = self.node_dir(n) if port is None else self.workdir / "extra" / name
        return self._spawn("supernode", name, argv, home)

    def add_node(
        self,
        type_index: int,
        port: int,
        *,
        register: bool = True,
        node_config: str | None = None,
        trainer_argv: Sequence[str] | None = None,
        wait: bool = True,
    ) -> int:
        """Start one more node of ``type_index`` on ``port`` after :meth:`start` (with its own key,
        registered or not, and its trainer); ``node_config`` replaces what it says about itself.
        Returns its index in :attr:`nodes`. Tests add attacking and forged nodes with it."""
        n = len(self.nodes)
        j = sum(1 for node in self.nodes if node["type_index"] == type_index)
        self.nodes.append(
            {"node": n, "type_index": type_index, "client_index": j, "port": port, "node_id": None}
        )
        key = make_node_key(self.node_key_path(n)) if self.secure else None
        if key is not None and register:
            from mots.training.control import ControlClient

            with ControlClient(self.address, self.ca_cert) as control:
                self.nodes[n]["node_id"] = control.register(key.public_pem, name=f"node-{n:02d}")
        if trainer_argv is not None and self.trainer:
            self.trainer_argv[n] = list(trainer_argv)
        config = self.node_config(n)
        if node_config is not None:
            sock = f' trainer-socket="{self._socket_path(n)}"' if self.has_trainer(n) else ""
            config = node_config + sock
        trains = self.has_trainer(n) and (register or not self.secure)
        if trains:
            self._start_trainer(n)
        info = self.spawn_supernode(
            f"supernode-{n:02d}", n, config, None if key is None else key.private_key
        )
        if wait:
            self._wait(
                lambda: (
                    readiness.nodes_ready(self, [n])
                    and (not trains or self._socket_path(n).exists())
                ),
                f"{info.name} to register",
                watch=[info.name, f"trainer-{n:02d}"],
            )
        self._save()
        return n

    def supernodes_per_type(self) -> dict[int, int]:
        """Type index → SuperNodes of this federation whose process is alive (every type of the
        federation present, 0 where none is)."""
        live = {
            int(p.name.split("-")[1])
            for p in self.processes
            if p.role == "supernode" and p.name.startswith("supernode-") and alive(p.pid)
        }
        out = dict.fromkeys((int(n["type_index"]) for n in self.nodes), 0)
        for n in live:
            if n < len(self.nodes):
                out[int(self.nodes[n]["type_index"])] += 1
        return out

    def _read_insecure_ids(self) -> None:
        """Without authentication, a node's id is the one it logged when it registered itself."""
        for p in self.processes:
            if p.role == "supernode" and p.name.startswith("supernode-"):
                n = int(p.name.split("-")[1])
                text = Path(p.log).read_text(errors="replace")
                found = re.findall(r"SuperNode ID: (\d+)", text)
                if found and n < len(self.nodes):
                    self.nodes[n]["node_id"] = int(found[-1])

    def kill_node(self, n: int) -> list[int]:
        """SIGKILL node ``n`` as a device that loses power: its SuperNode and ClientApp processes
        and its trainer. Returns the pids killed."""
        names = {f"supernode-{n:02d}", f"trainer-{n:02d}"}
        roots = [p.pid for p in self.processes if p.name in names]
        pids = set(roots) | descendants(roots)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return sorted(pids)

    def _all_registered(self) -> bool:
        """Every started SuperNode is ready (:func:`mots.training.readiness.nodes_ready`)."""
        return readiness.nodes_ready(self, readiness.supernodes_started(self))

    def online_node_ids(self) -> set[int]:
        """The node ids the SuperLink lists as ``online`` (empty when it does not answer)."""
        return readiness.online_node_ids(self)

    def faults(self) -> list[str]:
        """What keeps it from training, probed (the orchestration asks before each round)."""
        return readiness.faults(self)

    def stop(self, timeout: float = 15.0) -> list[int]:
        """SIGTERM every process group and descendant, SIGKILL what remains; remove the trainers'
        sockets and, when nothing survived, the state file; return survivors."""
        survivors = super().stop(timeout)
        shutil.rmtree(self._socket_path(0).parent, ignore_errors=True)
        if self._fork_socket is not None and not survivors:
            shutil.rmtree(self._fork_socket.parent, ignore_errors=True)
            self._fork_socket = None
        if not survivors:
            with contextlib.suppress(FileNotFoundError):
                (self.workdir / STATE_FILE).unlink()
        return survivors

    def status(self) -> dict[str, Any]:
        """Each started process: role, name, pid, alive, resident memory (with its descendants)."""
        rows = []
        for p in self.processes:
            kids = descendants([p.pid])
            if self._fork_socket is not None and p.role == "supernode":
                from mots.training.warm_fork import forked_pid

                forked = forked_pid(self._fork_socket, p.pid)
                kids |= set() if forked is None else {forked}
            rows.append(
                {
                    **asdict(p),
                    "alive": alive(p.pid),
                    "rss_mb": rss_mb(p.pid) + sum(rss_mb(c) for c in kids),
                    "children": sorted(kids),
                }
            )
        return {"superlink": self.address, "nodes": self.nodes, "processes": rows}

    def idle_node_memory_mb(self) -> float:
        """Mean resident memory of one idle edge node: SuperNode, its SuperExec, and its trainer."""
        st = self.status()["processes"]
        per = [float(r["rss_mb"]) for r in st if r["role"] in ("supernode", "trainer")]
        return float(sum(per)) / max(1, self.n_nodes)

    def __enter__(self) -> LocalFederation:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @classmethod
    def attach(cls, workdir: str | Path) -> LocalFederation:
        """The federation whose state lives in ``workdir`` (started by another process)."""
        path = Path(workdir) / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError as err:
            raise FederationError(
                f"workdir: no {STATE_FILE} in {workdir}; is a federation up there?"
            ) from err
        except json.JSONDecodeError as err:
            raise FederationError(f"workdir: {path} is not valid JSON ({err})") from err
        fed = cls(
            n_nodes=len(state["node_types"]),
            node_types=state["node_types"],
            superlink_port=int(state["superlink_port"]),
            workdir=workdir,
            type_names=state["type_names"],
            trainer=bool(state["trainer"]),
            secure=bool(state.get("secure", True)),
            policy=VerificationPolicy(**state.get("policy", {})),
            layout=str(state.get("layout", "subprocess")),
            task_data=state.get("task_data"),
        )
        fed.nodes = list(state["nodes"])
        fed.processes = [ProcessInfo(**p) for p in state["processes"]]
        return fed
