"""The write path's parts (services/market/booking.py): the one refusal rule, and the "every
client declared?" watch after a batch commits.

The booking itself (batches, shards, one-at-a-time fallback) is tested through
:func:`purchase_batcher` against both databases in test_purchases.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from services.market import booking as pb
from services.market.booking import DeclaredWatch
from services.market.errors import Conflict, Unavailable


class _Answers:
    """Stands in for the ledger's transactions: "is the round fully declared?" answered in turn."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.asked = 0

    async def run(self, work: Callable[[Any], bool]) -> bool:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        await asyncio.sleep(0.01)  # a round trip
        return answer

    read = run  # the watch's check only reads


def test_a_round_booked_again_during_its_check_is_checked_once_more(monkeypatch: Any) -> None:
    """Two more batches of a round while its check runs: one check at a time, one recheck after
    the interval, and the round reported complete once."""
    monkeypatch.setattr(pb, "DECLARED_CHECK_INTERVAL_S", 0.05)
    answers = _Answers([False, True])
    heard: list[int] = []

    async def scenario() -> None:
        watch = DeclaredWatch(answers, heard.append)  # type: ignore[arg-type]
        watch.booked([7])
        await asyncio.sleep(0.005)  # the check is waiting for its answer
        watch.booked([7])
        watch.booked([7])
        for _ in range(100):
            await asyncio.sleep(0.01)
            if heard:
                break
        await asyncio.sleep(0.1)

    asyncio.run(scenario())
    assert answers.asked == 2 and heard == [7]


def test_a_round_not_booked_again_is_not_rechecked(monkeypatch: Any) -> None:
    """Not yet declared and no purchase since: the check ends (the orchestration also polls)."""
    monkeypatch.setattr(pb, "DECLARED_CHECK_INTERVAL_S", 0.02)
    answers = _Answers([False, False])
    heard: list[int] = []

    async def scenario() -> None:
        watch = DeclaredWatch(answers, heard.append)  # type: ignore[arg-type]
        watch.booked([3, 4])
        await asyncio.sleep(0.2)

    asyncio.run(scenario())
    assert answers.asked == 2 and heard == []  # one check per round, none rechecked


def test_one_refusal_rule_for_every_kind_of_batch() -> None:
    """A batch that raises is booked one request at a time: alone, a request whose booking raises
    a refusal gets it, one that fails otherwise gets Unavailable, the others their outcome; each
    batch holds a shard of its own."""
    shards_seen: list[int] = []

    async def book(requests: Sequence[str], shard: int) -> pb.Booked[str]:
        shards_seen.append(shard)
        if "refused" in requests:
            raise Conflict("x", "refused")
        if "broken" in requests:
            raise RuntimeError("the ledger failed")
        return pb.Booked([r.upper() for r in requests], len(requests))

    booking: pb.Booking[str, str] = pb.Booking(
        "things", book, pb.Shards(2), lambda: Unavailable("thing", "retry")
    )
    out = asyncio.run(booking.handle(["a", "refused", "broken", "b"]))
    assert out[0] == "A" and out[3] == "B"
    assert isinstance(out[1], Conflict) and not isinstance(out[1], Unavailable)
    assert isinstance(out[2], Unavailable) and out[2].field == "thing"
    assert len(shards_seen) == 5  # the batch, then each alone
    assert asyncio.run(booking.handle(["c", "d"])) == ["C", "D"]


def test_the_last_declaration_is_heard_once_bookings_go_quiet(monkeypatch: Any) -> None:
    """Twenty clients declaring one after another (a batch every few milliseconds, then none):
    the round is checked again once its bookings go quiet, not a whole interval after the first
    check, so the orchestration hears "every client declared" within tens of milliseconds of the
    last one (a round of 20 clients waited up to 0.25 s here)."""
    monkeypatch.setattr(pb, "DECLARED_CHECK_INTERVAL_S", 5.0)
    monkeypatch.setattr(pb, "DECLARED_CHECK_MIN_GAP_S", 0.05, raising=False)
    answers = _Answers([False, True])
    heard: list[float] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        watch = DeclaredWatch(answers, lambda _: heard.append(loop.time()))  # type: ignore[arg-type]
        for _ in range(6):
            watch.booked([7])
            await asyncio.sleep(0.005)
        last = loop.time()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if heard:
                break
        assert heard and heard[0] - last < 1.0, "heard only after the interval"

    asyncio.run(scenario())
    assert answers.asked == 2


def test_bookings_that_keep_coming_are_checked_at_most_every_interval(monkeypatch: Any) -> None:
    """A round booked every few milliseconds for 0.5 s (a large market declaring): never quiet,
    so it is checked about every interval, not once per batch (the check counts every client)."""
    monkeypatch.setattr(pb, "DECLARED_CHECK_INTERVAL_S", 0.2)
    monkeypatch.setattr(pb, "DECLARED_QUIET_S", 0.1)  # a slow machine's pauses are not quiet
    answers = _Answers([False])

    async def scenario() -> None:
        watch = DeclaredWatch(answers, lambda _: None)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        end = loop.time() + 0.5
        while loop.time() < end:
            watch.booked([9])
            await asyncio.sleep(0.003)
        await asyncio.sleep(0.3)

    asyncio.run(scenario())
    assert 2 <= answers.asked <= 6  # once per batch would be over a hundred
