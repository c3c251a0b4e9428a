"""What the launcher needs of a federation, and the SuperLink that runs elsewhere.

:class:`Federation` is what ``flwr run`` (:mod:`mots.training.deployment`) needs: the SuperLink's
Control API address, the launcher's FLWR_HOME (:func:`write_connection`), the run directories and
the node map. :class:`ExternalSuperLink` stands for a SuperLink started elsewhere (the deployed one,
with the edge devices' SuperNodes): the launcher only registers the participants' keys and submits
runs to its Control API. :class:`mots.training.federation.LocalFederation` is the one started here.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from mots.training.pki import fingerprint
from mots.training.processes import FederationError
from mots.training.verification import VerificationPolicy

log = logging.getLogger(__name__)

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
    SuperLink publishes it on that shared volume).

    Several tasks' rounds train on it at once (issue 36): each round acquires (:meth:`acquire`) its
    coalition's SuperNode keys and gets an :class:`ExternalRun` (the federation its Flower run
    is launched on) with a node map of its own. The SuperLink admits the union of the active
    rounds' keys: a device has one key whichever tasks it trains, so a key two rounds hold is one
    Flower node, at its own (type, index) in each round's map. A key no active round holds any
    more leaves the SuperLink at the next acquisition's sync (as between two rounds before); a
    removed participant's key at once, unless another active round holds it
    (:meth:`ExternalRun.unregister_nodes`). ``control`` makes a Control API client (tests give a
    stand-in); the syncs take turns (one lock), the rounds do not. The active set lives in this
    object: one per SuperLink in one process (the training worker's one ``Trainer``), since
    another's sync would unregister keys it does not know are held.
    """

    def __init__(
        self,
        address: str,
        workdir: str | Path,
        *,
        ca_cert: Path | None = None,
        policy: VerificationPolicy | None = None,
        control: Callable[[], Any] | None = None,
    ) -> None:
        parse_address(address)
        self._address = address.strip()
        self._workdir = Path(workdir)
        self._ca_cert = ca_cert
        self.policy = policy or VerificationPolicy()
        self._control = control
        self._lock = threading.Lock()
        self._active: dict[int, dict[tuple[int, int], bytes]] = {}
        self._tokens = itertools.count(1)
        self._node_map: dict[int, tuple[int, int]] = {}

    @property
    def ca_cert(self) -> Path:
        """The CA certificate that verifies the SuperLink."""
        return self._ca_cert if self._ca_cert is not None else self._workdir / "tls" / "ca.crt"

    def _client(self) -> Any:
        """A Control API client (a context manager) to this SuperLink."""
        if self._control is not None:
            return self._control()
        from mots.training.control import ControlClient

        return ControlClient(self.address, self.ca_cert)

    def acquire(self, keys: Mapping[tuple[int, int], bytes]) -> ExternalRun:
        """Hold a round's coalition keys ((type, index) → public key PEM): the SuperLink is made
        to admit exactly the union of every active round's keys (one label per key: its
        fingerprint), and the round gets its node map (node id → (type, index) in its task).
        A sync that fails raises ControlError and holds nothing."""
        token = next(self._tokens)
        with self._lock:
            self._active[token] = dict(keys)
            try:
                ids = self._sync()
            except BaseException:
                del self._active[token]
                raise
            node_map = {ids[fingerprint(pem)]: ij for ij, pem in keys.items()}
            self._node_map = dict(node_map)
        return ExternalRun(self, token, node_map)

    def _sync(self) -> dict[str, int]:
        """Register the union of the active rounds' keys, unregister the rest (under the lock);
        fingerprint → node id."""
        union = {fingerprint(pem): pem for held in self._active.values() for pem in held.values()}
        with self._client() as control:
            ids: dict[str, int] = control.sync({fp[:16]: pem for fp, pem in union.items()})
        return {fp: ids[fp[:16]] for fp in union}

    def release(self, token: int) -> None:
        """A round ended: its keys leave the active set (the next sync drops those no other
        round holds; a SuperNode is not cut while nothing replaces it)."""
        with self._lock:
            self._active.pop(token, None)

    def active_keys(self) -> set[str]:
        """Fingerprints of the keys the active rounds hold."""
        with self._lock:
            return {fingerprint(p) for held in self._active.values() for p in held.values()}

    def unregister_for(
        self, token: int, node_ids: list[int], node_map: dict[int, tuple[int, int]]
    ) -> list[int]:
        """Round ``token`` removed the participants of ``node_ids`` (nodes of its map): their keys
        leave its set; those no other active round holds are unregistered at once (the node can
        no longer pull or push), those another round trains on stay registered (the removed
        run ignores them: ``removed.json``). Returns the node ids done (one whose unregistration
        failed is left for the next call)."""
        from mots.training.control import ControlError

        done: list[int] = []
        with self._lock:
            held = self._active.get(token, {})
            cut = []
            for node in node_ids:
                pem = held.pop(node_map[node], None) if node in node_map else None
                others = {
                    fingerprint(p)
                    for t, h in self._active.items()
                    if t != token
                    for p in h.values()
                }
                if pem is not None and fingerprint(pem) in others:
                    done.append(node)  # another round trains on it: excluded here only
                else:
                    cut.append((node, pem))
            if not cut:
                return done
            try:
                with self._client() as control:
                    for node, pem in cut:
                        try:
                            control.unregister(node)
                            done.append(node)
                        except ControlError:
                            log.warning("node %s could not be unregistered", node, exc_info=True)
                            if pem is not None:
                                held[node_map[node]] = pem  # tried again at the next call
            except ControlError:
                log.warning("the Control API could not be reached to unregister", exc_info=True)
                for node, pem in cut:
                    if pem is not None and node not in done:
                        held[node_map[node]] = pem
        return done

    def node_map(self) -> dict[int, tuple[int, int]]:
        """Flower node id → (type index, client index) of the latest round acquired (a caller
        that trains without acquiring, one round at a time, runs on it)."""
        return dict(self._node_map)

    def supernodes_per_type(self) -> dict[int, int]:
        """Type index → SuperNodes registered for the latest round acquired (whether each is
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


class ExternalRun:
    """One round's share of an :class:`ExternalSuperLink` (what :meth:`ExternalSuperLink.acquire`
    returns): a :class:`Federation` whose node map is the round's own (node id → (type, index)
    in its task), so two tasks' Flower runs at once each trust and message only their own
    coalition's nodes; the rest (address, FLWR_HOME, directories, policy, CA) is the link's.
    :meth:`release` (or leaving ``with``) ends the hold on its keys."""

    def __init__(
        self, link: ExternalSuperLink, token: int, node_map: dict[int, tuple[int, int]]
    ) -> None:
        self.link, self.token = link, token
        self._node_map = dict(node_map)
        self.policy = link.policy

    def node_map(self) -> dict[int, tuple[int, int]]:
        """Flower node id → (type index, client index) of this round's coalition."""
        return dict(self._node_map)

    def supernodes_per_type(self) -> dict[int, int]:
        """Type index → SuperNodes registered for this round."""
        return dict(Counter(t for t, _ in self._node_map.values()))

    def unregister_nodes(self, node_ids: list[int]) -> list[int]:
        """Removed participants' nodes (:class:`~mots.training.removal.NodePruner`): their keys
        unregistered unless another active round holds them (:meth:`ExternalSuperLink.
        unregister_for`); the node ids done."""
        return self.link.unregister_for(self.token, node_ids, self._node_map)

    def release(self) -> None:
        """The round ended: its keys leave the link's active set."""
        self.link.release(self.token)

    @property
    def address(self) -> str:
        """host:port of the SuperLink's Control API."""
        return self.link.address

    @property
    def ca_cert(self) -> Path:
        """The CA certificate that verifies the SuperLink."""
        return self.link.ca_cert

    @property
    def workdir(self) -> Path:
        """Where run directories are created (the link's)."""
        return self.link.workdir

    @property
    def flwr_home(self) -> Path:
        """FLWR_HOME of the launcher (the link's connection)."""
        return self.link.flwr_home

    def __enter__(self) -> ExternalRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
