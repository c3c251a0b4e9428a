"""What the launcher needs of a federation, and the SuperLink that runs elsewhere.

:class:`Federation` is what ``flwr run`` (:mod:`mots.training.deployment`) needs: the SuperLink's
Control API address, the launcher's FLWR_HOME (:func:`write_connection`), the run directories and
the node map. :class:`ExternalSuperLink` stands for a SuperLink started elsewhere (the deployed one,
with the edge devices' SuperNodes): the launcher only registers the participants' keys and submits
runs to its Control API. :class:`mots.training.federation.LocalFederation` is the one started here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from mots.training.processes import FederationError
from mots.training.verification import VerificationPolicy

CONNECTION = "mots-local"


class Federation(Protocol):
    """What the launcher (``flwr run``) needs of a federation: its address, directories, who
    each registered node is, and the verification policy of its runs."""

    policy: VerificationPolicy

    def node_map(self) -> dict[int, tuple[int, int]]:
        """Flower node id → (type index, client index) of every registered participant node."""
        ...

    @property
    def address(self) -> str:
        """host:port of the SuperLink's Control API."""
        ...

    @property
    def flwr_home(self) -> Path:
        """FLWR_HOME of ``flwr run``: holds the connection to the SuperLink."""
        ...

    @property
    def workdir(self) -> Path:
        """Where run directories (progress.jsonl, result.json) are created."""
        ...


def write_connection(flwr_home: Path, address: str, ca_cert: Path | None = None) -> None:
    """Write the ``flwr`` connection ``mots-local`` to ``address`` into FLWR_HOME: TLS verified
    by ``ca_cert``, or insecure when None (only to measure what TLS costs)."""
    flwr_home.mkdir(parents=True, exist_ok=True)
    tls = (
        "insecure = true\n"
        if ca_cert is None
        else f'root-certificates = "{Path(ca_cert).resolve()}"\n'
    )
    (flwr_home / "config.toml").write_text(
        f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
        f'address = "{address}"\n{tls}'
    )


def parse_address(address: str, field: str = "address") -> tuple[str, int]:
    """(host, port) of a ``host:port`` address; ValueError naming ``field`` and the rule."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{field}: expected host:port with a port in 1..65535, got {address!r}")
    return host, int(port)


class ExternalSuperLink:
    """A SuperLink this process did not start (e.g. the deployed one with the Pis' SuperNodes).

    The ServerApp runs next to that SuperLink and writes the run's ``progress.jsonl``,
    ``result.json`` and artifacts to the paths the launcher passes, so ``workdir`` and the
    artifact directory must be shared with it at the same paths (a volume in compose and k8s).
    The SuperLink's CA certificate is ``ca_cert``, by default ``<workdir>/tls/ca.crt`` (the
    SuperLink publishes it on that shared volume). :meth:`register_nodes` registers the
    participants' SuperNode keys through the Control API and keeps the node map.
    """

    def __init__(
        self,
        address: str,
        workdir: str | Path,
        *,
        ca_cert: Path | None = None,
        policy: VerificationPolicy | None = None,
    ) -> None:
        parse_address(address)
        self._address = address.strip()
        self._workdir = Path(workdir)
        self._ca_cert = ca_cert
        self.policy = policy or VerificationPolicy()
        self._node_map: dict[int, tuple[int, int]] = {}

    @property
    def ca_cert(self) -> Path:
        """The CA certificate that verifies the SuperLink."""
        return self._ca_cert if self._ca_cert is not None else self._workdir / "tls" / "ca.crt"

    def register_nodes(self, keys: Mapping[tuple[int, int], bytes]) -> dict[int, tuple[int, int]]:
        """Make the SuperLink admit exactly these SuperNode keys ((type, index) → public key PEM),
        unregistering any other; return and keep the node map."""
        from mots.training.control import ControlClient

        with ControlClient(self.address, self.ca_cert) as control:
            ids = control.sync({f"{i}-{j}": pem for (i, j), pem in keys.items()})
        self._node_map = {
            node_id: (int(label.split("-")[0]), int(label.split("-")[1]))
            for label, node_id in ids.items()
        }
        return dict(self._node_map)

    def node_map(self) -> dict[int, tuple[int, int]]:
        """Flower node id → (type index, client index) of the last registration."""
        return dict(self._node_map)

    def supernodes_per_type(self) -> dict[int, int]:
        """Type index → SuperNodes registered with the external SuperLink (whether each is
        connected right now only the SuperLink knows)."""
        return dict(Counter(t for t, _ in self._node_map.values()))

    @property
    def address(self) -> str:
        """host:port of the SuperLink's Control API."""
        return self._address

    @property
    def workdir(self) -> Path:
        """Where run directories are created (shared with the SuperLink's ServerApp)."""
        return self._workdir

    @property
    def flwr_home(self) -> Path:
        """FLWR_HOME of the launcher: holds the connection to the external SuperLink."""
        return self._workdir / "flwr-home"

    def connect(self) -> ExternalSuperLink:
        """Write the connection for ``flwr run`` (TLS, verified by the CA); nothing is started."""
        if not self.ca_cert.is_file():
            raise FederationError(
                f"ca_cert: the SuperLink's CA certificate {self.ca_cert} is missing (the SuperLink "
                "publishes it on the federation volume when it first starts)"
            )
        write_connection(self.flwr_home, self.address, self.ca_cert)
        return self

    def stop(self) -> list[int]:
        """Nothing to stop: the SuperLink and its SuperNodes belong to the deployment."""
        return []
