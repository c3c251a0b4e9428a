"""Who left a training round: participants revoked by the operator or departed (``DELETE
/v1/me``) while their round trains (issue 24, item 1).

The market leaves a revoked or departed client's SuperNode key out of the keys it hands out
(:func:`services.market.node_keys.keys_of`), so a participant whose key the round started with and
the market no longer returns any key for has been removed (one that rotated its key still has
one). :class:`MarketRemovals` asks the market at most
once per ``interval_s`` (the in-process engine asks before every FedAvg round, the Flower
launcher at every poll while the run trains: :mod:`mots.training.removal`) and remembers every removal;
a failed ask keeps what it knew (training never stops for it), and so does an ask not answered yet
(``fetch`` returns None: the training worker never waits on the market, see
:class:`services.orchestration.training_worker.MarketKeysAsk`). A participant that registered no
key cannot be told apart this way; the market's settlement still pays it nothing once removed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


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
