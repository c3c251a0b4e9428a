"""Training a round's coalition with Flower, through the training package's runner.

With ``MOTS_SUPERLINK_ADDRESS`` set, training runs on that external SuperLink (the deployed one,
whose SuperNodes are the edge devices): each round acquires the SuperNode keys its task's enrolled
clients registered at the market, the round's participants first in each type, and the SuperLink
admits the union of the active rounds' keys (and no other), so several tasks' rounds train at once
(issue 36) while each run's node map, its own, names exactly its participants' devices
(:class:`mots.training.external_superlink.ExternalRun`). Otherwise the orchestration worker keeps one local federation (a Flower SuperLink and
one SuperNode per registered client, tagged with its type; TLS and keys of its own), whose node
(i, j) stands for the type's j-th participant. Either way it hands the market's social state K
per type to ``mots.training.runner.train_coalition``, and reports per participant (client id)
whether its updates were verified in every round it was asked for, it dropped out, or it failed
verification (MOTS_TRAIN_POLICY: the verification and drop-out policy).

Participants revoked by the operator or departed (``DELETE /v1/me``) while their round trains
leave the coalition (issue 24, item 1): :class:`MarketRemovals` tells who. The market leaves a
revoked or departed client's SuperNode key out of the keys it hands out
(:func:`services.market.node_keys.keys_of`), so a participant whose key the round started with and
the market no longer returns any key for has been removed (one that rotated its key still has
one). It asks the market at most once per ``interval_s`` (the in-process engine asks before every
FedAvg round, the Flower launcher at every poll while the run trains:
:mod:`mots.training.removal`) and remembers every removal; a failed ask keeps what it knew
(training never stops for it), and so does an ask not answered yet (``fetch`` returns None: the
training worker never waits on the market, see
:class:`services.orchestration.training_worker.MarketKeysAsk`). A participant that registered no
key cannot be told apart this way; the market's settlement still pays it nothing once removed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import Coalition, TrainResult
from mots.platform.metrics import SUPERNODES
from mots.training.progress import RoundProgress
from services.orchestration.core.config import Settings

log = logging.getLogger(__name__)

VERIFIED = "verified"


def superlink_port(configured: int, n_nodes: int) -> int:
    """The local SuperLink's first port: the configured one, or (0) the first block of free
    ports a federation of ``n_nodes`` needs (`mots platform up --free-ports`)."""
    from mots.training.processes import free_port_block, ports_needed

    return configured or free_port_block(ports_needed(n_nodes))


def registered_keys(coalition: Coalition) -> dict[tuple[int, int], bytes]:
    """(type, index) → key of every enrolled client with a key: participants first, at indices
    0..K_i−1, then the others (the nodes an external SuperLink admits for the round)."""
    out: dict[tuple[int, int], bytes] = {}
    for i, joined in enumerate(coalition.clients):
        enrolled = coalition.enrolled[i] if i < len(coalition.enrolled) else []
        others = [c for c in enrolled if c not in joined]
        for j, cid in enumerate([*joined, *sorted(others)]):
            if cid in coalition.node_keys:
                out[(i, j)] = coalition.node_keys[cid].encode()
    return out


def _train_result(
    result: Any, participants: list[int], coalition: Coalition | None, seconds: float
) -> TrainResult:
    """The training worker's reply: the engine's outcome, its participants' fates, and the
    seconds the round's training took (from its task's lock taken)."""
    completed = result.metadata.get("completed_participants", participants)
    return TrainResult(
        epsilon=result.epsilon,
        losses=result.losses,
        round_seconds=result.round_seconds,
        artifact_path=str(result.artifact_path),
        artifact_sha256=str(result.artifact_sha256),
        completed=[int(x) for x in completed],
        seconds=seconds,
        metadata={k: v for k, v in result.metadata.items() if _jsonable(v)},
        participants=participant_outcomes(result.metadata, participants, coalition),
    )


class TaskFederation:
    """One task's local federation and the population (node types, D_i) it was started for; its
    lock lets one round of the task train at a time while another task's round trains on its
    own federation (issue 36: two tasks' rounds at once)."""

    def __init__(self) -> None:
        self.federation: Any = None
        self.node_types: list[int] | None = None
        self.sizes: list[float] | None = None
        self.lock = threading.Lock()

    def stop(self) -> None:
        """Stop the local federation, if one runs (an external SuperLink is left alone)."""
        if self.federation is not None:
            self.federation.stop()
        self.federation, self.node_types, self.sizes = None, None, None


class Trainer:
    """Runs ``train_coalition`` on the deployment engine (an external SuperLink or a live local
    federation per task) or in process.

    Every task trains on Flower (issue 36): a task's round runs the task's own architecture on
    the nodes' ``data-<task>`` folders (:mod:`mots.training.task_run`), with FedAvg's settings
    from its task file (``rounds:``); the default task keeps the deployment's MOTS_TRAIN_*
    settings. Locally each task has a federation of its own (its population's nodes, each
    holding its ``data-<task>`` folder: :func:`.task_trainer.device_folders`), so two tasks'
    rounds train at once, each a separate Flower run on its own SuperLink. On an external
    SuperLink they train at once too, each a Flower run with its own coalition's node map; a
    device in both coalitions is one SuperNode that serves both runs' messages in turn."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._tasks: dict[str, TaskFederation] = {}
        self._guard = threading.Lock()
        self._external: Any = None
        self._starting = threading.Lock()
        """One local federation starts at a time: its free ports are chosen, then bound."""

    def _state(self, task: str) -> TaskFederation:
        """The federation state of ``task``: its own lock (one round of a task at a time) and,
        locally, its own federation; on an external SuperLink every task's state holds the one
        link, whose key sync alone takes turns (issue 36: two tasks' rounds at once)."""
        with self._guard:
            return self._tasks.setdefault(task, TaskFederation())

    def _external_link(self) -> Any:
        """The one :class:`ExternalSuperLink` of MOTS_SUPERLINK_ADDRESS (connected once: the
        connection ``flwr run`` reads is written before any run)."""
        from mots.training.external_superlink import ExternalSuperLink

        with self._guard:
            if self._external is None:
                self._external = ExternalSuperLink(
                    str(self.settings.superlink_address),
                    Path(self.settings.federation_dir),
                    policy=self.settings.verification_policy(),
                ).connect()
            return self._external

    @property
    def _federation(self) -> Any:
        """The default task's federation (or the external SuperLink)."""
        return self._state(DEFAULT_TASK).federation

    @_federation.setter
    def _federation(self, value: Any) -> None:
        self._state(DEFAULT_TASK).federation = value

    def _task_config(
        self, task: str, sizes: list[float], node_types: list[int], spec: Any = None
    ) -> Any:
        """A round of ``task``'s FedAvg settings (its definition's ``rounds:``; ``spec``: the
        version the round is pinned to, else the current one) for the population; the default
        task's are the deployment's (:meth:`_config`)."""
        if task == DEFAULT_TASK:
            return self._config(sizes, node_types)
        from mots.training.task_run import task_train_config
        from services.orchestration.rounds.task_economics import task_file

        s = self.settings
        return task_train_config(
            spec or task_file(task, s),
            sizes,
            [node_types.count(i) for i in range(len(sizes))],
            fraction_train=s.train_fraction,
            min_train_clients=s.train_min_clients,
        )

    def _config(self, sizes: list[float], node_types: list[int]) -> Any:
        from mots.training.config import TrainConfig

        s = self.settings
        return TrainConfig(
            sizes=tuple(int(d) for d in sizes),
            counts=tuple(node_types.count(i) for i in range(len(sizes))),
            rounds=s.train_rounds,
            local_steps=s.train_local_steps,
            batch_size=s.train_batch_size,
            lr=s.train_lr,
            test_subset=s.train_test_subset,
            fraction_train=s.train_fraction,
            min_train_clients=s.train_min_clients,
        )

    def _ensure_federation(
        self,
        node_types: list[int],
        sizes: list[float],
        task: str = DEFAULT_TASK,
        version: int | None = None,
    ) -> Any:
        """The external SuperLink if one is configured; else a running local federation of
        ``task`` whose nodes match the population's types and data sizes (restarted if not)."""
        from mots.training.external_superlink import ExternalSuperLink

        address = self.settings.superlink_address
        policy = self.settings.verification_policy()
        state = self._state(task)
        if address:
            if not isinstance(state.federation, ExternalSuperLink):
                state.stop()
                state.federation = self._external_link()
            return state.federation
        if state.federation is not None and (state.node_types, state.sizes) == (node_types, sizes):
            faults = state.federation.faults()
            if not faults:
                return state.federation
            log.warning("the local federation of %s is restarted: %s", task, "; ".join(faults))
        state.stop()
        return self._start_local(node_types, policy, sizes, task, version)

    def _start_local(
        self,
        node_types: list[int],
        policy: Any,
        sizes: list[float],
        task: str = DEFAULT_TASK,
        version: int | None = None,
    ) -> Any:
        """A fresh local federation of ``task`` (one node per client of ``node_types``), each
        node training on a data folder of its own (``data-<task>``:
        :func:`.task_trainer.device_folders`, the demo devices' data, cut from the task's public
        set as ``mots data split`` does, or the devices' own under MOTS_DEVICE_DATA_DIR); the
        default task's in MOTS_FEDERATION_DIR on
        MOTS_SUPERLINK_PORT, another's in ``tasks/<task>`` below it on free ports. A start that
        fails is the platform's fault (:class:`~mots.training.processes.PlatformFault`), not the
        participants'."""
        from services.orchestration.task_trainer import device_folders

        base = Path(self.settings.federation_dir)
        folders = device_folders(task, base / "data", sizes, node_types, self.settings, version)
        default = task == DEFAULT_TASK
        with self._starting:
            return self._launch(node_types, policy, sizes, task, folders, default)

    def _launch(
        self,
        node_types: list[int],
        policy: Any,
        sizes: list[float],
        task: str,
        folders: str,
        default: bool,
    ) -> Any:
        """Start :meth:`_start_local`'s federation (ports chosen free, then bound)."""
        from mots.training.federation import LocalFederation
        from mots.training.processes import FederationError, PlatformFault

        base = Path(self.settings.federation_dir)
        fed = LocalFederation(
            n_nodes=len(node_types),
            node_types=node_types,
            superlink_port=superlink_port(
                self.settings.superlink_port if default else 0, len(node_types)
            ),
            workdir=base if default else base / "tasks" / task,
            policy=policy,
            fork=True,  # one host runs every node: import Flower and torch once, fork the nodes
            task_data={task: folders},
        )
        try:
            fed.start()
        except FederationError as err:
            raise PlatformFault(
                f"platform fault: the platform's local federation in {fed.workdir} did not start "
                f"({err}); the participants are not to blame"
            ) from err
        state = self._state(task)
        state.federation, state.node_types, state.sizes = fed, node_types, sizes
        return fed

    def train(
        self,
        participants: list[int],
        sizes: list[float],
        node_types: list[int],
        round_id: int,
        progress: Callable[[RoundProgress], None] | None = None,
        *,
        coalition: Coalition | None = None,
        removed: Callable[[], Collection[int]] | None = None,
        task: str = DEFAULT_TASK,
        task_version: int | None = None,
    ) -> TrainResult:
        """Train the coalition K (participants per type) and save the model artifact;
        ``progress`` hears of every FedAvg round (and clients finishing within one);
        ``coalition`` names the participants (and, on an external SuperLink, their keys);
        ``removed`` names the client ids revoked or departed so far (asked before each in-process
        round, polled while a Flower run trains): their updates are left out from then on, their
        SuperNode keys unregistered at the SuperLink (Flower), and they are reported dropped. A
        local federation whose node keys were unregistered so is stopped after the round (the
        next one starts it afresh, every node registered again); on an external SuperLink a
        removed client's key is unregistered unless another task's active round holds it (the
        device's one key), and the next round's key sync leaves it out. ``task`` (issue 36) names
        the round's task: its own model and data folders, on its own local federation;
        ``task_version`` the version the round was opened on (None: the current one), read once
        here so that the whole training uses exactly that definition."""
        from mots.training.external_superlink import ExternalRun, ExternalSuperLink
        from mots.training.runner import train_coalition
        from services.orchestration.rounds.task_economics import task_file

        spec = None if task == DEFAULT_TASK else task_file(task, self.settings, task_version)
        state = self._state(task)
        with state.lock:
            config = self._task_config(task, sizes, node_types, spec)
            artifact_dir = Path(self.settings.artifact_dir) / f"round-{round_id}"
            start = time.perf_counter()
            engine = self.settings.trainer
            federation = (
                self._ensure_federation(node_types, sizes, task, task_version)
                if engine == "deployment"
                else None
            )
            run = None
            if isinstance(federation, ExternalSuperLink) and coalition is not None:
                # the round's own coalition keys and node map; other tasks' rounds hold theirs
                run = federation = federation.acquire(registered_keys(coalition))
            _export_supernodes(federation, coalition)
            try:
                result = train_coalition(
                    participants,
                    config,
                    engine=engine,
                    federation=federation,
                    artifact_dir=artifact_dir,
                    progress=progress or False,
                    quoted_epsilon=None if coalition is None else coalition.quoted_epsilon,
                    removed=_positions(coalition, removed),
                    task=spec,
                )
            except Exception as exc:
                self._raise_platform_fault(federation, exc, state)
                raise
            finally:
                if run is not None:
                    run.release()
            seconds = time.perf_counter() - start
            _export_supernodes(federation, coalition)
            if result.metadata.get("removed_nodes") and not isinstance(
                federation, ExternalSuperLink | ExternalRun
            ):
                state.stop()  # its nodes' keys were unregistered: the next round starts afresh
        return _train_result(result, participants, coalition, seconds)

    def _raise_platform_fault(
        self, federation: Any, exc: Exception, state: TaskFederation | None = None
    ) -> None:
        """Raise :class:`~mots.training.processes.PlatformFault` when a failed training ran on a
        local federation that is itself broken (a SuperLink, template or SuperNode process gone:
        its participants' nodes are the platform's own processes, so their drop-out is the
        platform's fault); the federation is stopped so that the next round starts it afresh."""
        from mots.training.federation import LocalFederation
        from mots.training.processes import PlatformFault

        if not isinstance(federation, LocalFederation):
            return
        faults = federation.faults()
        if faults:
            (state or self._state(DEFAULT_TASK)).stop()
            raise PlatformFault(
                f"platform fault: the platform's local federation broke during training "
                f"({'; '.join(faults)}); the participants are not to blame "
                f"(the engine said: {type(exc).__name__}: {exc})"
            ) from exc

    def stop(self) -> None:
        """Stop every task's local federation (an external SuperLink is left alone)."""
        with self._guard:
            states = list(self._tasks.values())
        for state in states:
            state.stop()


class MarketRemovals:
    """``__call__()`` → the client ids among ``keys`` (participant → key at the round's start)
    whose key the market no longer hands out; ``fetch(ids)`` asks the market for their keys and
    returns the latest answer, or None while none has come."""

    def __init__(
        self,
        keys: dict[int, str],
        fetch: Callable[[list[int]], dict[int, str] | None],
        interval_s: float = 1.0,
    ) -> None:
        self.keys, self.fetch, self.interval_s = keys, fetch, interval_s
        self.removed: set[int] = set()
        self._asked = -float("inf")

    def __call__(self) -> set[int]:
        now = time.monotonic()
        if self.keys and now - self._asked >= self.interval_s:
            self._asked = now
            try:
                current = self.fetch(sorted(self.keys))
            except Exception:
                log.warning("the market's node keys could not be read", exc_info=True)
                return set(self.removed)
            if current is None:  # no answer yet: nothing new is known
                return set(self.removed)
            gone = {c for c in self.keys if c not in current}  # a rotated key is no removal
            if gone - self.removed:
                log.warning("participants %s removed while training", sorted(gone - self.removed))
            self.removed |= gone
        return set(self.removed)


def _positions(
    coalition: Coalition | None, removed: Callable[[], Collection[int]] | None
) -> Callable[[], list[tuple[int, int]]] | None:
    """``removed`` in the engine's terms: client ids → (type i, participant j)."""
    if coalition is None or removed is None:
        return None
    where = {cid: (i, j) for i, ids in enumerate(coalition.clients) for j, cid in enumerate(ids)}
    return lambda: [where[c] for c in removed() if c in where]


def _export_supernodes(federation: Any, coalition: Coalition | None) -> None:
    """``mots_supernodes_connected{task,type}``: the federation's SuperNodes per type of the
    coalition's task (alive processes of a local federation, registered nodes of an external
    SuperLink); nothing in process."""
    if federation is None or coalition is None or not coalition.type_names:
        return
    try:
        counts = federation.supernodes_per_type()
    except Exception:  # a gauge must never stop a training
        log.warning("SuperNodes per type could not be read", exc_info=True)
        return
    task = getattr(coalition, "task", None) or DEFAULT_TASK  # issue 36: the round's task
    for i, name in enumerate(coalition.type_names):
        SUPERNODES.labels(task, name).set(counts.get(i, 0))


def participant_outcomes(
    metadata: dict[str, Any], participants: list[int], coalition: Coalition | None
) -> list[dict[str, Any]]:
    """Each participant's outcome with its client id: the engine's record of the participant
    (type i, index j) is the coalition's j-th participant of type i; an engine that keeps no
    record (in process) verified everyone it trained."""
    rows = metadata.get("participant_status")
    if rows is None:
        rows = [
            {"type_index": i, "client_index": j, "status": VERIFIED, "reason": ""}
            for i, k in enumerate(participants)
            for j in range(k)
        ]
    out = []
    for row in rows:
        i, j = int(row["type_index"]), int(row["client_index"])
        clients = (
            coalition.clients[i] if coalition is not None and i < len(coalition.clients) else []
        )
        out.append(
            {
                "client_id": clients[j] if j < len(clients) else None,
                "type_index": i,
                "client_index": j,
                "status": str(row["status"]),
                "left_in_round": row.get("left_in_round"),
                "reason": str(row.get("reason", "")),
                "rounds_asked": row.get("rounds_asked"),
                "rounds_verified": row.get("rounds_verified"),
            }
        )
    return out


def _jsonable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | list | dict) or value is None
