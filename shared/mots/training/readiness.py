"""Whether a local federation is ready, and what is wrong with one, found by probing its parts
(issue 40), never by reading their logs: a restarted federation once passed its checks on the
previous run's log lines and started its SuperNodes before its template listened.

The warm-fork template is ready when its socket accepts a connection; a SuperNode when it listens
on its own runtime port and, with authentication, its registered node id is ``online`` in the
SuperLink's node list (Control API ``ListNodes``). :func:`faults` says what keeps a started
federation from training (an exited process, a SuperLink that does not listen).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from mots.training.processes import ProcessInfo, alive, listening, unix_socket_accepts


class LocalFederation(Protocol):
    """What the probes read of a :class:`mots.training.federation.LocalFederation` (a protocol,
    so that the federation can import this module without an import cycle)."""

    _fork_socket: Path | None
    nodes: list[dict[str, Any]]
    secure: bool
    superlink_port: int

    @property
    def processes(self) -> Sequence[ProcessInfo]: ...

    @property
    def address(self) -> str: ...

    @property
    def ca_cert(self) -> Path | None: ...

    def _read_insecure_ids(self) -> None: ...


def template_ready(fed: LocalFederation) -> bool:
    """The template accepts connections on its socket (it binds only after its imports)."""
    return fed._fork_socket is not None and unix_socket_accepts(fed._fork_socket)


def supernodes_started(fed: LocalFederation) -> list[int]:
    """The node indices of the SuperNodes started so far."""
    return [
        int(p.name.split("-")[1])
        for p in fed.processes
        if p.role == "supernode" and p.name.startswith("supernode-")
    ]


def nodes_ready(fed: LocalFederation, indices: Sequence[int]) -> bool:
    """Nodes ``indices`` listen on their runtime ports and, secure, are ``online`` at the
    SuperLink. Without authentication the SuperLink lists no node to the Control API's caller,
    so a node's id is taken from its own log, fresh per start."""
    nodes = [fed.nodes[n] for n in indices if n < len(fed.nodes)]
    if not all(listening(int(node["port"])) for node in nodes):
        return False
    if not fed.secure:
        fed._read_insecure_ids()
        return all(node["node_id"] is not None for node in nodes)
    online = online_node_ids(fed)
    return all(node["node_id"] in online for node in nodes)


def online_node_ids(fed: LocalFederation) -> set[int]:
    """The node ids the SuperLink lists as ``online`` (empty when it does not answer)."""
    from mots.training.control import ControlClient, ControlError

    try:
        with ControlClient(fed.address, fed.ca_cert, timeout=5.0) as control:
            return {n.node_id for n in control.nodes() if n.status == "online"}
    except ControlError:
        return set()


def faults(fed: LocalFederation) -> list[str]:
    """What keeps a started federation from training: a process that exited, a SuperLink that
    does not listen (or nothing started); empty while it can train."""
    out = [f"{p.name} (pid {p.pid}) exited" for p in fed.processes if not alive(p.pid)]
    if not fed.processes:
        out.append("no process started")
    elif not listening(fed.superlink_port):
        out.append(f"the SuperLink does not listen on {fed.address}")
    return out
