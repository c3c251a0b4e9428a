"""The ServerApp's phases on a stand-in Grid (the SuperLink is the outer edge here; the real one
runs in tests/benchmarks/test_integrity_federation.py): choosing participants by the node map,
drop-outs at the round's deadline, the minimum share, and the per-participant record."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from flwr.app import Error, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from edge.flower_app import server_app as sa
from mots.training import flower_messages as fm
from mots.training.config import TrainConfig
from mots.training.partition import round_sample
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
    ctx = type("Ctx", (), {"run_config": rc})()
    return sa.setup(ctx)  # type: ignore[arg-type]


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


def test_a_missing_or_failed_reply_drops_the_node_and_the_round_goes_on() -> None:
    """One good reply, one error reply, one silence: the silent node is dropped soon after the
    quorum replied (not at the hard deadline), the failing one at once; nothing raises."""
    s = _setup({1: (0, 0), 2: (0, 1), 3: (0, 2)}, [3, 0], straggler_grace_s=0.5)
    chosen = sa.choose(s)
    grid = FakeGrid({1: ok, 2: fails, 3: silent})
    weights = [np.zeros(3, np.float32)]
    start = time.monotonic()
    good = sa.train_round(grid, 0, weights, chosen, s, on_reply=lambda n: None)  # type: ignore[arg-type]
    assert time.monotonic() - start < 5.0, "the round waited for the straggler's hard deadline"
    assert list(good) == [1]
    status = {p.node_id: (p.status, p.left_in_round, p.rounds_asked) for p in chosen}
    assert status == {1: ("verified", None, 1), 2: ("dropped", 0, 1), 3: ("dropped", 0, 1)}
    assert "ClientApp crashed" in chosen[1].reason and "deadline" in chosen[2].reason


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
    sa.wait_connected(FakeGrid({1: ok, 2: ok, 3: ok}, online={1, 2}), chosen, timeout=0.2)  # type: ignore[arg-type]
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
