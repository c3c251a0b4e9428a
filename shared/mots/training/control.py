"""Registering SuperNode keys with the SuperLink's Control API (what ``flwr supernode register`` does).

With ``--enable-supernode-auth`` the SuperLink admits a SuperNode only if its public key was
registered through the Control API; registration returns the node id Flower will give that node.
The orchestration (or a local federation) therefore decides who may train: it registers exactly
the keys of the participants it knows, keeps the returned ids as the node map the ServerApp trusts,
and unregisters keys that are revoked. Only the orchestration reaches the Control API
(:mod:`mots.training.superlink` serves it apart from the Fleet API).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from mots.training.pki import fingerprint


class ControlError(RuntimeError):
    """The Control API refused or failed a request; the message says which and why."""


@dataclass(frozen=True)
class RegisteredNode:
    """A SuperNode key the SuperLink knows, with Flower's node id and status for it."""

    node_id: int
    public_pem: bytes
    status: str

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the public key (hex)."""
        return fingerprint(self.public_pem)


class ControlClient:
    """A Control API client over TLS (``ca_cert`` verifies the SuperLink's certificate)."""

    def __init__(self, address: str, ca_cert: Path | None, timeout: float = 30.0) -> None:
        from flwr.supercore.control import ControlHttpClient

        self.address = address
        try:
            self._client = ControlHttpClient.from_server_address(
                server_address=address,
                insecure=ca_cert is None,
                root_certificates=None if ca_cert is None else Path(ca_cert).read_bytes(),
                interceptors=[],
            )
        except (OSError, ValueError) as err:
            raise ControlError(f"Control API {address}: cannot create a client ({err})") from err

    def _call(self, what: str, fn: Any, request: Any) -> Any:
        try:
            return fn(request)
        except Exception as err:  # Flower raises its own errors and httpx's
            raise ControlError(f"Control API {self.address}: {what} failed ({err})") from err

    def register(self, public_pem: bytes, name: str | None = None) -> int:
        """Register a SuperNode public key (PEM); return the node id Flower assigns it. A key
        registered before keeps its node id."""
        from flwr.proto.control_pb2 import RegisterNodeRequest

        known = {n.fingerprint: n for n in self.nodes() if n.status != "unregistered"}
        if fingerprint(public_pem) in known:
            return known[fingerprint(public_pem)].node_id
        res = self._call(
            "register-node",
            self._client.RegisterNode,
            RegisterNodeRequest(public_key=public_pem.strip() + b"\n", name=name),
        )
        if not res.node_id:
            raise ControlError(f"Control API {self.address}: register-node returned no node id")
        return int(res.node_id)

    def unregister(self, node_id: int) -> None:
        """Remove a SuperNode: its key can no longer connect."""
        from flwr.proto.control_pb2 import UnregisterNodeRequest

        self._call(
            "unregister-node", self._client.UnregisterNode, UnregisterNodeRequest(node_id=node_id)
        )

    def nodes(self) -> list[RegisteredNode]:
        """Every SuperNode the SuperLink knows (registered, online, offline or unregistered)."""
        from flwr.proto.control_pb2 import ListNodesRequest

        res = self._call("list-nodes", self._client.ListNodes, ListNodesRequest())
        return [
            RegisteredNode(int(n.node_id), bytes(n.public_key), str(n.status))
            for n in res.nodes_info
        ]

    def sync(self, keys: Mapping[str, bytes]) -> dict[str, int]:
        """Make the registered keys exactly ``keys`` (label → public key PEM): register the new,
        unregister the rest. Returns label → node id."""
        wanted = {fingerprint(pem): label for label, pem in keys.items()}
        for node in self.nodes():
            if node.status != "unregistered" and node.fingerprint not in wanted:
                self.unregister(node.node_id)
        return {label: self.register(pem, name=label) for label, pem in keys.items()}

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
