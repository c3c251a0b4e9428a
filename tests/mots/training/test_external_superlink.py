"""The external SuperLink's bookkeeping of rounds that train at once (issue 36): each round holds
its task's coalition keys, the SuperLink admits the union of the active rounds' keys (a device's
one key is one Flower node, whichever tasks it trains), each round gets its own node map, and a
round's end or a removal never cuts a node another active round still trains on. A stand-in
Control API (the real one runs in tests/services/orchestration/test_trainer_external.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mots.training.control import ControlError
from mots.training.external_superlink import ExternalSuperLink
from mots.training.pki import fingerprint
from mots.training.removal import NodePruner

K1, K2, K3 = b"key-one", b"key-two", b"key-three"


class FakeControl:
    """Flower's Control API as far as the launcher uses it: a key registered gets a fresh node
    id; one registered again keeps its id; one unregistered and registered again gets a new id."""

    def __init__(self) -> None:
        self.registered: dict[str, int] = {}  # fingerprint → node id
        self.labels: list[str] = []
        self.unregistered: list[int] = []
        self.next_id = 100
        self.inside = 0
        self.most_inside = 0
        self.fail_unregister = False

    def __call__(self) -> FakeControl:  # the factory: one "connection" per use
        return self

    def __enter__(self) -> FakeControl:
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.inside -= 1

    def sync(self, keys: Mapping[str, bytes]) -> dict[str, int]:
        time.sleep(0.01)  # long enough for two unguarded syncs to interleave
        wanted = {fingerprint(pem) for pem in keys.values()}
        for fp in [fp for fp in self.registered if fp not in wanted]:
            self.unregistered.append(self.registered.pop(fp))
        out = {}
        for label, pem in keys.items():
            if fingerprint(pem) not in self.registered:
                self.next_id += 1
                self.registered[fingerprint(pem)] = self.next_id
            out[label] = self.registered[fingerprint(pem)]
            self.labels.append(label)
        return out

    def unregister(self, node_id: int) -> None:
        if self.fail_unregister:
            raise ControlError("unreachable")
        self.registered = {fp: n for fp, n in self.registered.items() if n != node_id}
        self.unregistered.append(node_id)

    def ids(self, *pems: bytes) -> set[int]:
        return {self.registered[fingerprint(p)] for p in pems}


def _link(tmp_path: Path, control: FakeControl) -> ExternalSuperLink:
    return ExternalSuperLink("superlink:9093", tmp_path, control=control)


def test_two_rounds_register_the_union_and_each_gets_its_own_node_map(tmp_path: Path) -> None:
    """Task A's coalition (K1, K2) and task B's (K2, K3) at once: K2, one device in both tasks,
    is one node, at (1, 0) in A's map and (0, 0) in B's; the labels are per key, not (i, j)."""
    control = FakeControl()
    link = _link(tmp_path, control)

    a = link.acquire({(0, 0): K1, (1, 0): K2})
    b = link.acquire({(0, 0): K2, (2, 0): K3})

    assert set(control.registered) == {fingerprint(k) for k in (K1, K2, K3)}
    n1, n2, n3 = (control.registered[fingerprint(k)] for k in (K1, K2, K3))
    assert a.node_map() == {n1: (0, 0), n2: (1, 0)}
    assert b.node_map() == {n2: (0, 0), n3: (2, 0)}
    assert control.unregistered == []
    assert len(set(control.labels)) == 3 and not any("-0" in x for x in control.labels)
    assert a.supernodes_per_type() == {0: 1, 1: 1} and b.supernodes_per_type() == {0: 1, 2: 1}


def test_a_rounds_end_keeps_the_keys_another_round_holds(tmp_path: Path) -> None:
    """A ends: its keys leave the active set; the next sync keeps K2 (B trains on it) and drops
    K1; B's node map is unchanged throughout."""
    control = FakeControl()
    link = _link(tmp_path, control)
    a = link.acquire({(0, 0): K1, (1, 0): K2})
    b = link.acquire({(0, 0): K2, (2, 0): K3})
    b_map = b.node_map()
    n1 = control.registered[fingerprint(K1)]

    a.release()
    c = link.acquire({(0, 0): K3})

    assert set(control.registered) == {fingerprint(K2), fingerprint(K3)}
    assert control.unregistered == [n1]
    assert b.node_map() == b_map
    assert c.node_map() == {control.registered[fingerprint(K3)]: (0, 0)}
    assert link.active_keys() == {fingerprint(K2), fingerprint(K3)}
    b.release()
    c.release()
    assert link.active_keys() == set()


def test_removal_unregisters_only_keys_no_other_round_holds(tmp_path: Path) -> None:
    """A removes both its participants while B trains: K1 (only A's) is unregistered at once; K2
    (B's too) stays registered, recorded removed for A's run only, and is not registered again
    for A by a later sync."""
    control = FakeControl()
    link = _link(tmp_path, control)
    a = link.acquire({(0, 0): K1, (1, 0): K2})
    b = link.acquire({(0, 0): K2, (2, 0): K3})
    n1, n2 = control.registered[fingerprint(K1)], control.registered[fingerprint(K2)]

    pruner = NodePruner(a, tmp_path, lambda: [(0, 0), (1, 0)])
    pruner()

    assert pruner.recorded == {n1, n2} and pruner.pruned == {n1, n2}
    assert control.unregistered == [n1]
    assert fingerprint(K2) in control.registered and b.node_map()[n2] == (0, 0)
    link.acquire({(0, 0): K3})  # a third round's sync: A no longer holds K1 or K2
    assert fingerprint(K1) not in control.registered
    b.release()
    link.acquire({(0, 0): K3})
    assert fingerprint(K2) not in control.registered  # gone once no round holds it


def test_a_failed_unregister_is_tried_again(tmp_path: Path) -> None:
    """The Control API unreachable: the node is not reported pruned, so the next poll retries."""
    control = FakeControl()
    link = _link(tmp_path, control)
    a = link.acquire({(0, 0): K1})
    n1 = control.registered[fingerprint(K1)]
    control.fail_unregister = True
    assert a.unregister_nodes([n1]) == []
    control.fail_unregister = False
    assert a.unregister_nodes([n1]) == [n1]
    assert control.unregistered == [n1]


def test_concurrent_acquisitions_sync_one_at_a_time(tmp_path: Path) -> None:
    """Eight rounds acquired from eight threads: the syncs never overlap and every key of
    every round is registered at the end."""
    control = FakeControl()
    link = _link(tmp_path, control)
    keys = [f"key-{n}".encode() for n in range(8)]
    runs: list[Any] = []

    def go(n: int) -> None:
        runs.append(link.acquire({(0, 0): keys[n], (1, 0): keys[(n + 1) % 8]}))

    threads = [threading.Thread(target=go, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert control.most_inside == 1
    assert set(control.registered) == {fingerprint(k) for k in keys}
    assert control.unregistered == []
    for run in runs:
        assert set(run.node_map()) <= set(control.registered.values())


def test_a_failed_sync_leaves_the_round_out(tmp_path: Path) -> None:
    """A sync that fails raises, and the round's keys are not left in the active set."""

    class Broken(FakeControl):
        def sync(self, keys: Mapping[str, bytes]) -> dict[str, int]:
            raise ControlError("down")

    link = _link(tmp_path, Broken())
    with pytest.raises(ControlError):
        link.acquire({(0, 0): K1})
    assert link.active_keys() == set()


def test_a_run_is_a_federation_of_the_link(tmp_path: Path) -> None:
    """What ``flwr run`` needs of a run (address, FLWR_HOME, work and run directories, policy,
    CA) is its link's; ``with`` releases it."""
    control = FakeControl()
    link = _link(tmp_path, control)
    with link.acquire({(0, 0): K1}) as run:
        assert (run.address, run.flwr_home, run.workdir) == (
            link.address,
            link.flwr_home,
            link.workdir,
        )
        assert run.policy is link.policy and run.ca_cert == link.ca_cert
        assert link.active_keys() == {fingerprint(K1)}
    assert link.active_keys() == set()
