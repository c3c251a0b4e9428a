"""Progress bars with ETA (rich, on stderr) for the long commands: train, sweep, reproduce, demo.

Two shapes of report feed them: a training engine's :class:`~mots.training.progress.RoundProgress`
(FedAvg round r of R) and the one-line messages of the sweeps and the reproduction, whose
``done/total`` count (``sweep 3/12: …``, ``mnist: 5/40 K=…``) moves the bar. stdout stays clean
for ``--json``; with stderr not a terminal rich prints the bar once, when it ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from mots.training.progress import RoundProgress

_COUNT = re.compile(r"\b(\d+)/(\d+)\b")


def _bar(console: Console | None) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=console or Console(stderr=True),
    )


@contextmanager
def round_bar(
    label: str, total: int | None = None, console: Console | None = None
) -> Iterator[Callable[[RoundProgress], None]]:
    """A bar over FedAvg rounds; the callback takes the engine's round reports."""
    with _bar(console) as bar:
        task = bar.add_task(label, total=total, status="")

        def report(p: RoundProgress) -> None:
            done = p.round if p.partial else p.round + 1
            status = f"ε {p.epsilon:.4f} · clients {p.clients_done}/{p.clients}"
            bar.update(task, total=p.rounds, completed=done, status=status)

        yield report


@contextmanager
def message_bar(
    label: str, total: int | None = None, console: Console | None = None
) -> Iterator[Callable[[str], None]]:
    """A bar moved by messages that carry a ``done/total`` count; the last message is shown."""
    with _bar(console) as bar:
        task = bar.add_task(label, total=total, status="")

        def report(message: str) -> None:
            count = _COUNT.search(message)
            if count is not None:
                done, of = int(count.group(1)), int(count.group(2))
                bar.update(task, total=of, completed=done)
            bar.update(task, status=message if len(message) <= 60 else message[:59] + "…")

        yield report
