"""Progress of long training runs: rounds done, clients done, ε so far (Issue 3, item 7)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class RoundProgress:
    """One finished round as the engines report it."""

    round: int
    rounds: int
    clients_done: int
    clients: int
    epsilon: float
    seconds: float
    partial: bool = False
    """True while the round is under way (clients_done < clients, ε of the previous round)."""


class ProgressPrinter:
    """Writes one line per round (at most every ``min_interval`` s, and always the last one)."""

    def __init__(
        self, label: str = "train", stream: TextIO | None = None, min_interval: float = 1.0
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval = min_interval
        self._last = 0.0
        self._start = time.perf_counter()

    def __call__(self, p: RoundProgress) -> None:
        """Print ``p`` unless a line was printed less than ``min_interval`` ago."""
        now = time.perf_counter()
        final = p.round + 1 == p.rounds and not p.partial
        if not final and now - self._last < self.min_interval:
            return
        self._last = now
        self.stream.write(
            f"[{self.label}] round {p.round + 1}/{p.rounds}  clients {p.clients_done}/{p.clients}  "
            f"ε={p.epsilon:.4f}{' (last round)' if p.partial else ''}  "
            f"round {p.seconds:.2f}s  elapsed {now - self._start:.1f}s\n"
        )
        self.stream.flush()
