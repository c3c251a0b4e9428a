"""The ServerApp's phases on a stand-in Grid (the SuperLink is the outer edge here; the real one
runs in tests/benchmarks/test_integrity_federation.py): choosing participants by the node map,
drop-outs at the round's deadline, the minimum share, the per-participant record, and Flower's own
round loop (``Strategy.start``) driving :class:`VerifyingFedAvg`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from edge.flower_app import server_app as app
from mots.training import flower_messages as fm
from mots.training import participants as sa
from mots.training.config import TrainConfig
from mots.training.partition import round_sample
from mots.training.strategy import Model, QuorumGrid, VerifyingFedAvg
from mots.training.verification import VerificationPolicy

Reply = Callable[[Message], Message | None]


@pytest.fixture(autouse=True)
def task_identity() -> Iterator[None]:
    """What flwr-serverapp sets at start-up."""
    before = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = before


class FakeGrid:
    """Answers each pushed message with what its node's behaviour returns (None: never)."""

    def __init__(self, behaviour: dict[int, Reply], online: set[int] | None = None) -> None:
        self.behaviour = behaviour
        self.online = set(behaviour) if online is None else online
        self.pushed: dict[str, Message] = {}

    def get_node_ids(self) -> list[int]:
        return sorted(self.online)

    def push_messages(self, messages: list[Message]) -> list[str]:
        ids = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = m.object_id  # what the SuperLink assigns
            self.pushed[m.object_id] = m
            ids.append(m.object_id)
        return ids

    def pull_messages(self, ids: set[str]) -> list[Message]:
        out = []
        for i in ids:
            m = self.pushed[i]
            reply = self.behaviour[m.metadata.dst_node_id](m)
            if reply is not None:
                out.append(reply)
        return out


def ok(m: Message) -> Message:
    metrics = MetricRecord({"train_seconds": 0.1, "client_seconds": 0.2})
    return Message(
        RecordDict({"arrays": m.content.array_records["arrays"], "metrics": metrics}), reply_to=m
    )


def fails(m: Message) -> Message:
    return Message(Error(code=0, reason="ClientApp crashed"), reply_to=m)


def silent(m: Message) -> None:
    return None


def _setup(node_map: dict[int, tuple[int, int]], k: list[int], **policy: object) -> sa.RunSetup:
    cfg = TrainConfig(sizes=(50, 120), counts=(3, 3))
    rc = fm.run_config(
        cfg,
        k,
        "",
        node_map=node_map,
        policy=VerificationPolicy(**policy),  # type: ignore[arg-type]
    )
    return sa.setup(rc)


def test_participants_come_from_the_node_map_not_from_the_nodes() -> None:
    """The mapped nodes of indices 0..K_i−1 of each type; a participant without one is dropped."""
    s = _setup({11: (0, 1), 12: (0, 0), 13: (1, 0), 14: (0, 2)}, [2, 1])
    chosen = sa.choose(s)
    assert [(p.node_id, p.type_index, p.client_index) for p in chosen] == [
        (12, 0, 0),
        (11, 0, 1),
        (13, 1, 0),
    ]
    short = sa.choose(_setup({12: (0, 0), 13: (1, 0)}, [1, 2]))
    assert [(p.node_id, p.status, p.reason) for p in short] == [
        (12, sa.VERIFIED, ""),
        (13, sa.VERIFIED, ""),
        (0, sa.DROPPED, "no registered SuperNode key"),
    ]
    with pytest.raises(ValueError, match="node-map"):
        fm.node_map_from_run({fm.RUN_NODE_MAP: "{}"})


def _strategy(s: sa.RunSetup, weights: list[np.ndarray]) -> VerifyingFedAvg:
    """The strategy on a stand-in model (verification off: the model is only combined)."""
    model = Model(None, ["w"], weights, None, None, None, float("nan"), (1, 1, 3))
    return VerifyingFedAvg(s, sa.choose(s), model)


def test_each_train_message_names_the_participant_the_node_is_in_this_run() -> None:
    """A device of two tasks is one node with one node config: each task's run tells it who it
    is in that task (type, index) from the run's node map, so the ClientApp checks its data
    against that type's D (issue 36)."""
    s = _setup({11: (0, 1), 12: (0, 0), 13: (1, 0)}, [2, 1], verify=False)
    strategy = _strategy(s, [np.ones(3, np.float32)])
    msgs = strategy.configure_train(1, ArrayRecord([np.ones(3, np.float32)]), ConfigRecord(), None)  # type: ignore[arg-type]
    said = {
        m.metadata.dst_node_id: (
            m.content.config_records["config"][fm.MSG_TYPE_INDEX],
            m.content.config_records["config"][fm.MSG_CLIENT_INDEX],
        )
        for m in msgs
    }
    assert said == {12: (0, 0), 11: (0, 1), 13: (1, 0)}


def test_a_missing_or_failed_reply_drops_the_node_and_the_round_goes_on() -> None:
    """One good reply, one error reply, one silence: the silent node is dropped soon after the
    quorum replied (not at the hard deadline), the failing one at once; nothing raises."""
    s = _setup(
        {1: (0, 0), 2: (0, 1), 3: (0, 2)},
        [3, 0],
        straggler_grace_s=0.5,
        verify=False,
        min_share=0.3,
    )
    weights = [np.ones(3, np.float32)]
    strategy = _strategy(s, weights)
    chosen = strategy.chosen
    grid = QuorumGrid(FakeGrid({1: ok, 2: fails, 3: silent}), strategy.quorum)  # type: ignore[arg-type]
    start = time.monotonic()
    msgs = strategy.configure_train(1, ArrayRecord(weights), ConfigRecord(), grid)
    replies = grid.send_and_receive(msgs, timeout=s.policy.round_timeout_s)
    assert time.monotonic() - start < 5.0, "the round waited for the straggler's hard deadline"
    arrays, metrics = strategy.aggregate_train(1, replies)
    assert list(strategy._good) == [1]
    assert arrays is not None and metrics is not None and metrics["verified"] == 1
    np.testing.assert_array_equal(arrays.to_numpy_ndarrays()[0], weights[0])
    status = {p.node_id: (p.status, p.left_in_round, p.rounds_asked) for p in chosen}
    assert status == {1: ("verified", None, 1), 2: ("dropped", 0, 1), 3: ("dropped", 0, 1)}
    assert "ClientApp crashed" in chosen[1].reason and "deadline" in chosen[2].reason


def test_flowers_round_loop_runs_the_strategy_and_records_each_round(tmp_path: Path) -> None:
    """Strategy.start (Flower's loop) on the stand-in Grid: each round asks the participants
    (round r = server_round − 1 in the message), combines their updates (the nodes here add
    1 + node id to every weight: uniform FedAvg of two), writes one progress line per round plus
    the partial ones, and the outcome counts both participants as completed."""

    def adds(m: Message) -> Message:
        w = m.content.array_records["arrays"].to_numpy_ndarrays()
        r = int(m.content.config_records["config"]["round"])
        assert m.metadata.group_id == str(r)
        step = 1.0 + m.metadata.dst_node_id
        metrics = MetricRecord({"train_seconds": 0.1, "client_seconds": 0.2})
        return Message(
            RecordDict({"arrays": ArrayRecord([w[0] + step]), "metrics": metrics}), reply_to=m
        )

    s = _setup({1: (0, 0), 2: (1, 0)}, [1, 1], verify=False)
    s.out = tmp_path
    s.noop = True  # no test model: ε is NaN, nothing is published but the record
    s.cfg = s.cfg.model_copy(update={"rounds": 2, "aggregation": "uniform"})
    strategy = _strategy(s, [np.zeros(3, np.float32)])
    strategy.start(
        grid=QuorumGrid(FakeGrid({1: adds, 2: adds}), strategy.quorum, strategy.on_reply),  # type: ignore[arg-type]
        initial_arrays=ArrayRecord(strategy.model.weights),
        num_rounds=2,
        timeout=5.0,
        evaluate_fn=strategy.evaluate,
    )
    np.testing.assert_allclose(strategy.model.weights[0], [5.0, 5.0, 5.0])  # 2 × mean(2, 3)
    lines = [json.loads(x) for x in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert [x["round"] for x in lines if not x.get("partial")] == [0, 1]
    assert [x["clients_done"] for x in lines if not x.get("partial")] == [2, 2]
    out = strategy.outcome(run_id=7, discover_seconds=0.0)
    assert out["completed_participants"] == [1, 1] and out["asked_per_round"] == [[1, 2], [1, 2]]
    assert len(out["losses"]) == 2 and out["run_id"] == 7
    json.dumps(out)


def test_min_share_ends_training_with_each_participants_record() -> None:
    """Below the minimum share the run fails, naming who left and why, and carries the rows."""
    s = _setup({1: (0, 0), 2: (0, 1), 3: (0, 2)}, [3, 0], min_share=0.6)
    chosen = sa.choose(s)
    chosen[0].leave(sa.FAILED, 0, "norm: too large")
    sa.check_share(chosen, s.policy, "round 1")  # 2 of 3 ≥ ⌈0.6·3⌉ = 2
    chosen[1].leave(sa.DROPPED, 1, "no reply")
    with pytest.raises(
        sa.RunFailedError, match=r"1 of 3 participants remain, the policy needs 2"
    ) as e:
        sa.check_share(chosen, s.policy, "round 2")
    assert [row["status"] for row in e.value.participants] == [sa.FAILED, sa.DROPPED, sa.VERIFIED]


def test_absent_nodes_are_dropped_before_round_one_and_completed_counts_verified_ones() -> None:
    """A chosen node that never connects is dropped; completed counts per type only the
    participants verified in every round they were asked."""
    s = _setup({1: (0, 0), 2: (1, 0), 3: (1, 1)}, [1, 2])
    chosen = sa.choose(s)
    app.wait_connected(FakeGrid({1: ok, 2: ok, 3: ok}, online={1, 2}), chosen, timeout=0.2)  # type: ignore[arg-type]
    assert [p.status for p in chosen] == [sa.VERIFIED, sa.VERIFIED, sa.DROPPED]
    chosen[0].rounds_asked = chosen[0].rounds_verified = 2
    chosen[1].rounds_asked, chosen[1].rounds_verified = 2, 1
    assert sa.completed_per_type(chosen, 2) == [1, 0]
    json.dumps(sa.participant_rows(chosen))  # plain JSON


def test_sampling_asks_the_in_process_draw_and_pays_the_ones_never_drawn() -> None:
    """fraction_train 0.5, min 1: each round asks round_sample's draw among the active
    participants (the in-process engines' draw while nobody left, 2 of 4 here, 1 of 3 once one
    left); a participant verified whenever asked counts as completed, also one no round drew."""
    s = _setup({1: (0, 0), 2: (0, 1), 3: (1, 0), 4: (1, 1)}, [2, 2])
    s.cfg = s.cfg.model_copy(update={"fraction_train": 0.5, "seed": 3})
    chosen = sa.choose(s)
    for r in range(4):
        asked = sa.sampled(chosen, s.cfg, r)
        want = [chosen[int(i)] for i in round_sample(4, s.cfg, r)]
        assert asked == want and len(asked) == 2
    full = sa.sampled(chosen, s.cfg.model_copy(update={"fraction_train": 1.0}), 0)
    assert full == chosen
    chosen[0].leave(sa.DROPPED, 0, "no reply")
    assert len(sa.sampled(chosen, s.cfg, 1)) == 1  # ⌊3·0.5⌋ = 1 of the 3 still active
    assert chosen[0] not in sa.sampled(chosen, s.cfg, 1)
    chosen[1].rounds_asked = chosen[1].rounds_verified = 1
    chosen[2].rounds_asked, chosen[2].rounds_verified = 1, 1
    # chosen[3] was never drawn: it stood ready, it counts; chosen[0] dropped out: it does not
    assert sa.completed_per_type(chosen, 2) == [1, 2]


class _Registry:
    """What :class:`NodePruner` needs of a federation: the node map (the launcher's)."""

    def node_map(self) -> dict[int, tuple[int, int]]:
        return {1: (0, 0), 2: (0, 1), 3: (0, 2), 4: (0, 3)}


def test_nodes_removed_while_training_are_ignored_not_awaited_and_not_asked_again(
    tmp_path: Path,
) -> None:
    """Issue 24: two participants are removed (revoked or departed) while round 0 trains; the
    launcher's NodePruner records them in removed.json before unregistering their keys. The one
    whose (large) reply is in is not averaged; the silent one is not awaited (the round ends long
    before the straggler grace); both are dropped in round 0 and not asked in round 1."""
    from mots.training.removal import REMOVED_FILE, REMOVED_REASON, NodePruner

    cfg = TrainConfig(sizes=(50, 120), counts=(4, 3), aggregation="uniform")
    policy = VerificationPolicy(straggler_grace_s=30.0, verify=False, min_share=0.3)
    node_map = {1: (0, 0), 2: (0, 1), 3: (0, 2), 4: (0, 3)}
    s = sa.setup(fm.run_config(cfg, [4, 0], str(tmp_path), node_map=node_map, policy=policy))
    strategy = _strategy(s, [np.zeros(3, np.float32)])
    unregistered: list[list[int]] = []

    def unregister(ids: list[int]) -> list[int]:
        recorded = json.loads((tmp_path / REMOVED_FILE).read_text())["node_ids"]
        assert set(ids) <= set(recorded), "the ServerApp must know before the node goes silent"
        unregistered.append(ids)
        return ids

    pruner = NodePruner(_Registry(), tmp_path, lambda: {(0, 2), (0, 3)}, unregister)

    def adds(step: float) -> Reply:
        def reply(m: Message) -> Message:
            w = m.content.array_records["arrays"].to_numpy_ndarrays()
            metrics = MetricRecord({"train_seconds": 0.1, "client_seconds": 0.2})
            return Message(
                RecordDict({"arrays": ArrayRecord([w[0] + step]), "metrics": metrics}), reply_to=m
            )

        return reply

    def removed_now(m: Message) -> None:
        pruner()  # the market's answer comes while the round trains
        return None

    grid = QuorumGrid(
        FakeGrid({1: adds(1.0), 2: adds(3.0), 3: removed_now, 4: adds(100.0)}),  # type: ignore[arg-type]
        strategy.quorum,
        removed=strategy.removed,
    )
    start = time.monotonic()
    msgs = strategy.configure_train(1, ArrayRecord(strategy.model.weights), ConfigRecord(), grid)
    replies = grid.send_and_receive(msgs, timeout=60.0)
    assert time.monotonic() - start < 5.0, "the round waited for a removed node"
    arrays, _ = strategy.aggregate_train(1, replies)
    assert arrays is not None
    np.testing.assert_allclose(arrays.to_numpy_ndarrays()[0], [2.0, 2.0, 2.0])  # mean(1, 3)
    status = {p.node_id: (p.status, p.left_in_round, p.reason) for p in strategy.chosen}
    assert status[3] == status[4] == ("dropped", 0, REMOVED_REASON)
    assert status[1][0] == status[2][0] == "verified"
    assert unregistered == [[3, 4]]
    pruner()  # nothing new: nothing unregistered twice
    assert unregistered == [[3, 4]]
    again = strategy.configure_train(2, arrays, ConfigRecord(), grid)
    assert sorted(m.metadata.dst_node_id for m in again) == [1, 2]


def test_node_pruner_tries_a_failed_unregistration_again() -> None:
    """A Control API failure leaves the node recorded as removed and is retried at the next poll."""
    import tempfile

    from mots.training.removal import NodePruner, RemovedNodes

    tries: list[list[int]] = []

    def flaky(ids: list[int]) -> list[int]:
        tries.append(ids)
        return [] if len(tries) == 1 else ids

    with tempfile.TemporaryDirectory() as d:
        pruner = NodePruner(_Registry(), Path(d), lambda: [(0, 1), (5, 5)], flaky)
        pruner()
        assert RemovedNodes(Path(d))() == {2}  # (5, 5) is no node of this run
        pruner()
        pruner()
    assert tries == [[2], [2]]


def test_the_strategy_and_the_inprocess_engine_give_the_same_aggregate(fashion_dir: Path) -> None:
    """The same updates, combined by each engine: each participant's round-0 update as its
    ClientApp computes it (``handle_train``), sent as replies through Flower's message types and
    combined by :meth:`VerifyingFedAvg.aggregate_train`, equals the in-process engine's round 0
    (its per-client loop) bit for bit; both combine with ``fedavg.RoundAggregate``. Weighted
    FedAvg over unequal D_i (50, 120), so the weights matter."""
    from mots.training.edge_trainer import handle_train
    from mots.training.inprocess import run_inprocess

    cfg = TrainConfig(
        data_dir=fashion_dir,
        sizes=(50, 120),
        counts=(3, 3),
        rounds=1,
        local_steps=5,
        test_subset=200,
        aggregation="weighted",
    )
    k = [2, 1]
    expected = run_inprocess(k, cfg, vectorised=False)[0].weights
    node_map = {1: (0, 0), 2: (0, 1), 3: (1, 0)}
    rc = fm.run_config(cfg, k, "", node_map=node_map, policy=VerificationPolicy(verify=False))
    start = [np.zeros((10, 784), np.float32), np.zeros(10, np.float32)]

    def trains(m: Message) -> Message:
        i, j = node_map[m.metadata.dst_node_id]
        request = {"config": cfg.model_dump(mode="json"), "type_index": i, "client_index": j}
        sent = m.content.array_records["arrays"].to_numpy_ndarrays()
        new, info = handle_train({**request, "round": 0}, sent)
        metrics = MetricRecord(
            {"train_seconds": 0.1, "client_seconds": 0.2, "samples": info["samples"]}
        )
        return Message(RecordDict({"arrays": ArrayRecord(new), "metrics": metrics}), reply_to=m)

    strategy = _strategy(sa.setup(rc), start)
    grid = QuorumGrid(FakeGrid(dict.fromkeys(node_map, trains)), strategy.quorum)  # type: ignore[arg-type]
    msgs = strategy.configure_train(1, ArrayRecord(start), ConfigRecord(), grid)
    arrays, metrics = strategy.aggregate_train(1, grid.send_and_receive(msgs, timeout=60))
    assert arrays is not None and metrics is not None and metrics["verified"] == 3
    got = arrays.to_numpy_ndarrays()
    assert [a.shape for a in got] == [a.shape for a in expected]
    assert float(np.abs(got[0]).sum()) > 0.0  # the clients trained
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
