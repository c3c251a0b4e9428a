"""Participants removed while a Flower run trains (issue 24, item 1): the launcher's side and the
ServerApp's side.

The market removes a participant that departs (``DELETE /v1/me``) or that the operator revokes
(``DELETE /v1/clients/{id}``); the orchestration learns of it while the round trains
(:class:`services.orchestration.trainer.MarketRemovals`) as (type i, participant j). On the
deployment engine two things then follow, both from the launcher (:mod:`mots.training.deployment`,
which alone reaches the SuperLink's Control API):

1. :class:`NodePruner` writes the removed participants' Flower node ids to ``removed.json`` in the
   run directory (atomically; the ids only grow) and then unregisters their SuperNode keys through
   the Control API (``UnregisterNode``, what ``flwr supernode unregister`` does). From then on the
   SuperLink refuses every Fleet call signed by that key (Flower's node authentication looks the
   key up and finds it unregistered), so the node can neither pull the next message nor push a
   reply. The file comes first so that the ServerApp knows the reason before the node goes
   silent. On an external SuperLink where several tasks' rounds train at once (issue 36), a
   device's one key may serve another active round too: the round's
   :class:`~mots.training.external_superlink.ExternalRun` then leaves the key registered, and
   the removal excludes the node from this run only (its updates ignored, as in 2.); the key is
   unregistered once no active round holds it (at the next round's key sync).
2. The ServerApp's :class:`RemovedNodes` reads that file (re-read only when it changed):
   :class:`mots.training.strategy.VerifyingFedAvg` asks no removed node from the next FedAvg round
   on, ignores a reply of one that is still in flight in the current round (so its update is
   never averaged after the removal is known), records it ``dropped`` with the round it left in,
   and :class:`mots.training.strategy.QuorumGrid` stops waiting for its reply.

The run directory is the channel the launcher and the ServerApp already share (``progress.jsonl``,
``result.json``), on an external SuperLink a volume mounted at the same path.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REMOVED_FILE = "removed.json"
REMOVED_REASON = "removed (revoked or departed) while training"


class NodePruner:
    """Launcher side: ``__call__()`` (polled while the run is followed) asks ``removed`` for the
    participants (i, j) removed so far, records their node ids in ``removed.json`` and
    unregisters their keys at the SuperLink (one that failed is tried again at the next poll):
    through the federation's ``unregister_nodes`` where it has one (an external SuperLink's
    round, which keeps a key another active round holds), else through the Control API."""

    def __init__(
        self,
        federation: Any,
        run_dir: Path,
        removed: Callable[[], Collection[tuple[int, int]]],
        unregister: Callable[[list[int]], list[int]] | None = None,
    ) -> None:
        self.federation, self.path, self.removed = federation, run_dir / REMOVED_FILE, removed
        self.nodes = {ij: node for node, ij in federation.node_map().items()}
        own = getattr(federation, "unregister_nodes", None)  # an external SuperLink's round
        self.unregister = unregister or own or self._unregister
        self.recorded: set[int] = set()
        self.pruned: set[int] = set()

    def __call__(self) -> None:
        new = {self.nodes[ij] for ij in self.removed() if ij in self.nodes} - self.recorded
        if new:
            self.recorded |= new
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"node_ids": sorted(self.recorded)}))
            tmp.replace(self.path)
            log.warning("nodes %s removed from the run; unregistering their keys", sorted(new))
        todo = sorted(self.recorded - self.pruned)
        if todo:
            self.pruned |= set(self.unregister(todo))

    def _unregister(self, node_ids: list[int]) -> list[int]:
        """Unregister ``node_ids`` through the Control API; return those done."""
        from mots.training.control import ControlClient, ControlError

        done = []
        try:
            with ControlClient(self.federation.address, self.federation.ca_cert) as control:
                for node in node_ids:
                    try:
                        control.unregister(node)
                        done.append(node)
                    except ControlError:
                        log.warning("node %s could not be unregistered", node, exc_info=True)
        except ControlError:
            log.warning("the Control API could not be reached to unregister", exc_info=True)
        return done


class RemovedNodes:
    """ServerApp side: ``__call__()`` → the node ids the launcher recorded as removed (empty
    without a run directory or before any removal); the file is read again only when changed."""

    def __init__(self, out: Path | None) -> None:
        self.path = out / REMOVED_FILE if out is not None else None
        self._stamp: tuple[int, int, int] | None = None
        self._ids: frozenset[int] = frozenset()

    def __call__(self) -> frozenset[int]:
        if self.path is None:
            return self._ids
        try:
            st = self.path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # each write is a new file (replace)
            if stamp != self._stamp:
                ids = json.loads(self.path.read_text())["node_ids"]
                self._ids |= frozenset(int(n) for n in ids)
                self._stamp = stamp
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("%s could not be read; tried again at the next check", self.path)
        return self._ids
