"""MicroBatcher: requests in flight are handled together, one ``handle`` call per batch."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import pytest

from mots.platform.batching import MicroBatcher


class Recorder:
    """An async ``handle`` that doubles each request, sleeps a while and records its batches."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.batches: list[list[int]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def __call__(self, batch: Sequence[int]) -> list[int | BaseException]:
        self.batches.append(list(batch))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return [2 * r for r in batch]


async def _submit_all(batcher: MicroBatcher[int, int], requests: Sequence[int]) -> list[int]:
    results: list[int] = list(await asyncio.gather(*(batcher.submit(r) for r in requests)))
    return results


async def _outcomes(
    batcher: MicroBatcher[int, int], requests: Sequence[int]
) -> list[int | BaseException]:
    """Each request's result or the exception raised to its caller."""
    results: list[int | BaseException] = list(
        await asyncio.gather(*(batcher.submit(r) for r in requests), return_exceptions=True)
    )
    return results


def test_results_come_back_in_request_order() -> None:
    """Each caller gets the result of its own request, whatever the batching."""
    handle = Recorder(delay=0.01)
    batcher: MicroBatcher[int, int] = MicroBatcher(handle, max_batch=7)
    requests = list(range(40))
    results = asyncio.run(_submit_all(batcher, requests))
    assert results == [2 * r for r in requests]
    # every request handled exactly once, in submission order across the batches
    assert [r for b in handle.batches for r in b] == requests


def test_concurrent_submits_are_grouped_and_max_batch_is_respected() -> None:
    """50 submits in flight against a slow handle: fewer batches than requests, none too big."""
    handle = Recorder(delay=0.02)
    batcher: MicroBatcher[int, int] = MicroBatcher(handle, max_batch=16)
    results = asyncio.run(_submit_all(batcher, list(range(50))))
    assert results == [2 * r for r in range(50)]
    sizes = [len(b) for b in handle.batches]
    assert sum(sizes) == 50
    assert len(sizes) < 50
    assert max(sizes) <= 16
    assert max(sizes) == 16  # the queue filled while the first batch was in flight
    assert batcher.batches == len(sizes)
    assert batcher.requests == 50
    assert batcher.largest_batch == max(sizes)
    assert batcher.mean_batch == pytest.approx(50 / len(sizes))


def test_one_request_alone_is_a_batch_of_one() -> None:
    """A lone submit is not held back waiting for company."""
    handle = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(handle)
    assert asyncio.run(batcher.submit(21)) == 42
    assert handle.batches == [[21]]
    assert MicroBatcher(handle).mean_batch == 0.0


def test_an_exception_result_is_raised_to_its_caller_only() -> None:
    """A result that is an exception fails that request; its batch mates get their results."""
    seen: list[list[int]] = []

    async def handle(batch: Sequence[int]) -> list[int | BaseException]:
        seen.append(list(batch))
        await asyncio.sleep(0.01)
        return [KeyError(r) if r % 5 == 0 else r + 1 for r in batch]

    batcher: MicroBatcher[int, int] = MicroBatcher(handle)

    results = asyncio.run(_outcomes(batcher, range(1, 21)))
    assert len(seen) < 20  # batched
    for r, got in zip(range(1, 21), results, strict=True):
        if r % 5 == 0:
            assert isinstance(got, KeyError) and got.args == (r,)
        else:
            assert got == r + 1


def test_handle_raising_fails_every_request_of_that_batch() -> None:
    """If ``handle`` raises, each caller of that batch gets the exception; other batches don't."""
    calls: list[list[int]] = []

    async def handle(batch: Sequence[int]) -> list[int | BaseException]:
        calls.append(list(batch))
        await asyncio.sleep(0.01)
        if 7 in batch:
            raise RuntimeError("database down")
        return list(batch)

    batcher: MicroBatcher[int, int] = MicroBatcher(handle, max_batch=4)

    results = asyncio.run(_outcomes(batcher, range(10)))
    failed = next(set(b) for b in calls if 7 in b)
    assert len(failed) > 1 and len(calls) > 1
    for r, got in zip(range(10), results, strict=True):
        if r in failed:
            assert isinstance(got, RuntimeError) and str(got) == "database down"
        else:
            assert got == r


def test_handle_returning_the_wrong_count_fails_the_batch() -> None:
    """One result per request, or every caller gets a RuntimeError that names ``handle``."""

    async def handle(batch: Sequence[int]) -> list[int | BaseException]:
        results: list[int | BaseException] = list(batch)
        return results[:-1]

    batcher: MicroBatcher[int, int] = MicroBatcher(handle)
    with pytest.raises(RuntimeError, match="handle"):
        asyncio.run(batcher.submit(1))


def test_two_writers_handle_two_batches_at_once() -> None:
    """writers=2: two batches are in flight at the same time (their handle calls overlap)."""
    one = Recorder(delay=0.05)
    single: MicroBatcher[int, int] = MicroBatcher(one, max_batch=5, writers=1)
    asyncio.run(_submit_all(single, list(range(20))))
    assert one.most_in_flight == 1

    two = Recorder(delay=0.05)
    double: MicroBatcher[int, int] = MicroBatcher(two, max_batch=5, writers=2)
    results = asyncio.run(_submit_all(double, list(range(20))))
    assert results == [2 * r for r in range(20)]
    assert two.most_in_flight == 2
    assert all(len(b) <= 5 for b in two.batches)


def test_threaded_runs_a_blocking_handle_in_worker_threads() -> None:
    """threaded(): the blocking handle runs off the event loop, batched, results in order."""
    loop_thread = threading.get_ident()
    threads: set[int] = set()
    sizes: list[int] = []
    lock = threading.Lock()
    active = 0
    most_active = 0

    def handle(batch: Sequence[int]) -> list[int | BaseException]:
        nonlocal active, most_active
        with lock:
            threads.add(threading.get_ident())
            sizes.append(len(batch))
            active += 1
            most_active = max(most_active, active)
        time.sleep(0.03)
        with lock:
            active -= 1
        return [ValueError(r) if r == 13 else -r for r in batch]

    batcher: MicroBatcher[int, int] = MicroBatcher.threaded(handle, max_batch=8, writers=2)
    try:
        results = asyncio.run(_outcomes(batcher, range(30)))
    finally:
        batcher.close()
    assert loop_thread not in threads
    assert sum(sizes) == 30 and len(sizes) < 30 and max(sizes) <= 8
    assert most_active == 2
    for r, got in zip(range(30), results, strict=True):
        if r == 13:
            assert isinstance(got, ValueError)
        else:
            assert got == -r


def test_a_batcher_serves_a_second_event_loop() -> None:
    """A batcher used from a new event loop (a test client's portal) starts afresh and works."""
    handle = Recorder(delay=0.005)
    batcher: MicroBatcher[int, int] = MicroBatcher(handle)
    assert asyncio.run(_submit_all(batcher, [1, 2, 3])) == [2, 4, 6]
    assert asyncio.run(_submit_all(batcher, [4, 5])) == [8, 10]


def _blocking(batch: Sequence[int]) -> list[int | BaseException]:
    results: list[int | BaseException] = list(batch)
    return results


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_batch": 0}, "max_batch"),
        ({"max_batch": -3}, "max_batch"),
        ({"writers": 0}, "writers"),
        ({"writers": -1}, "writers"),
    ],
)
def test_invalid_settings_are_refused_with_the_field(kwargs: dict[str, int], field: str) -> None:
    """max_batch < 1 or writers < 1: a ValueError that names the field."""
    with pytest.raises(ValueError, match=field):
        MicroBatcher(Recorder(), **kwargs)


def test_threaded_refuses_a_bad_max_batch_with_the_field() -> None:
    """threaded(max_batch=0): the constructor's ValueError naming ``max_batch``."""
    with pytest.raises(ValueError, match="max_batch"):
        MicroBatcher.threaded(_blocking, max_batch=0)


def test_threaded_refuses_a_bad_writers_with_the_field() -> None:
    """threaded(writers=0): a ValueError naming ``writers``, like the constructor's."""
    with pytest.raises(ValueError, match="writers"):
        MicroBatcher.threaded(_blocking, writers=0)
