"""Micro-batching: requests in flight on an event loop are handled together, one call per batch.

Each :meth:`MicroBatcher.submit` waits on a future; a free writer takes everything queued so far
(up to ``max_batch``) and awaits ``handle`` on it: a coroutine on the event loop (an async
database driver, no thread and no GIL hand-offs) or, with :meth:`MicroBatcher.threaded`, a
blocking function in a worker thread. A database then sees one transaction and a fixed number
of statements per batch instead of per request; while batches are handled the next one fills
(group commit). With ``writers`` > 1, that many batches are in flight at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from mots.platform.metrics import BATCH_DURATION, BATCH_SIZE

Req = TypeVar("Req")
Out = TypeVar("Out")


def _check_sizes(max_batch: int, writers: int) -> None:
    if max_batch < 1:
        raise ValueError(f"max_batch: must be ≥ 1, got {max_batch}")
    if writers < 1:
        raise ValueError(f"writers: must be ≥ 1, got {writers}")


class MicroBatcher(Generic[Req, Out]):
    """Collects requests from the event loop and handles them in batches.

    ``handle`` gets a batch and returns one result per request, in order; a result that is an
    exception is raised to that request's caller alone. If ``handle`` itself raises, every
    request of the batch gets the exception.
    """

    def __init__(
        self,
        handle: Callable[[Sequence[Req]], Awaitable[Sequence[Out | BaseException]]],
        max_batch: int = 256,
        name: str = "batch",
        writers: int = 1,
    ) -> None:
        _check_sizes(max_batch, writers)
        self._handle = handle
        self._max_batch = max_batch
        self._writers = writers
        self.name = name
        BATCH_SIZE.labels(name)  # exported at 0 before the first batch (rate() sees the first)
        BATCH_DURATION.labels(name)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[Req, asyncio.Future[Out]]] = []
        self._running: set[asyncio.Task[None]] = set()
        self.batches = 0
        self.requests = 0
        self.largest_batch = 0

    @property
    def max_batch(self) -> int:
        """The most requests handled together."""
        return self._max_batch

    @property
    def writers(self) -> int:
        """How many batches are handled at once."""
        return self._writers

    @classmethod
    def threaded(
        cls,
        handle: Callable[[Sequence[Req]], Sequence[Out | BaseException]],
        max_batch: int = 256,
        name: str = "batch",
        writers: int = 1,
    ) -> MicroBatcher[Req, Out]:
        """A batcher whose blocking ``handle`` runs in worker threads (the loop's default pool).

        At most ``writers`` batches are in flight, so at most that many threads are busy.
        """
        _check_sizes(max_batch, writers)

        async def in_thread(batch: Sequence[Req]) -> Sequence[Out | BaseException]:
            return await asyncio.get_running_loop().run_in_executor(None, handle, batch)

        return cls(in_thread, max_batch=max_batch, name=name, writers=writers)

    async def submit(self, request: Req) -> Out:
        """Handle ``request`` together with the others in flight; its result (or raise)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (e.g. a test client's portal): start afresh
            self._loop, self._pending, self._running = loop, [], set()
        future: asyncio.Future[Out] = loop.create_future()
        self._pending.append((request, future))
        self._start_writers(loop)
        return await future

    def _start_writers(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._pending and len(self._running) < self._writers:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            task = loop.create_task(self._write(batch))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._loop is not None and not self._loop.is_closed():
            self._start_writers(self._loop)

    async def _write(self, batch: list[tuple[Req, asyncio.Future[Out]]]) -> None:
        requests = [r for r, _ in batch]
        self.batches += 1
        self.requests += len(batch)
        self.largest_batch = max(self.largest_batch, len(batch))
        BATCH_SIZE.labels(self.name).observe(len(batch))
        start = time.perf_counter()
        try:
            results = await self._handle(requests)
            if len(results) != len(batch):
                raise RuntimeError(
                    f"handle: returned {len(results)} results for {len(batch)} requests"
                )
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        finally:
            BATCH_DURATION.labels(self.name).observe(time.perf_counter() - start)
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():  # the caller went away (cancelled)
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    @property
    def mean_batch(self) -> float:
        """Mean requests per batch so far."""
        return self.requests / self.batches if self.batches else 0.0

    def close(self) -> None:
        """Cancel the batches in flight (after the app stops taking requests).

        The batcher stays usable: an app whose lifespan runs again submits to it afresh.
        """
        for task in list(self._running):
            task.cancel()
