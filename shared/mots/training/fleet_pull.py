"""The SuperNode's Fleet pull pace (issue 36's round time): after a pull that found no message,
Flower 1.42's SuperNode sleeps a fixed 3 s, so each FedAvg round waited up to 3 s for its message.
:class:`PullPacer` keeps Flower's 3 s while a node is idle and :data:`ACTIVE_PULL_S` while it is in
a run; :func:`set_fleet_pull_interval` installs it (or a fixed ``--fleet-pull-interval``) in the
SuperNode's loop. What each pull sends (TLS, the node's signature) is unchanged.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

FLEET_PULL_SLEEP_S = 3.0
"""What Flower 1.42's SuperNode sleeps after a Fleet pull that found no message (fixed in code)."""
ACTIVE_PULL_S = 0.25
"""The Fleet pull's sleep while the node is in a run (:class:`PullPacer`): the next FedAvg round's
message is picked up within this instead of within Flower's 3 s."""
ACTIVE_WINDOW_S = 15.0
"""A node counts as in a run this long after it last received a message or waited for its
ClientApp's reply; an idle node pulls every 3 s as Flower does (no extra load on the SuperLink)."""
REPLY_WAIT_S = 0.5
"""What Flower's SuperNode sleeps between looks for a reply or an object (local state only)."""


class PullPacer:
    """The Fleet pull loop's sleep after a pull that found nothing: Flower's 3 s while the node is
    idle, :data:`ACTIVE_PULL_S` within :data:`ACTIVE_WINDOW_S` of its last activity (a message
    received, or a wait for the ClientApp's reply: the loop's 0.5 s sleeps happen only while it
    handles a message). Between two FedAvg rounds a node then waits a quarter second for the next
    round's message, not up to 3 s; what each pull sends (TLS, the node's signature) is unchanged."""

    def __init__(
        self,
        idle_s: float = FLEET_PULL_SLEEP_S,
        active_s: float = ACTIVE_PULL_S,
        window_s: float = ACTIVE_WINDOW_S,
    ) -> None:
        self.idle_s, self.active_s, self.window_s = idle_s, active_s, window_s
        self.last = -math.inf

    def active(self) -> None:
        """The node received a message or is handling one."""
        self.last = time.monotonic()

    def interval(self) -> float:
        """Seconds to sleep after an empty pull now."""
        return self.active_s if time.monotonic() - self.last < self.window_s else self.idle_s


def set_fleet_pull_interval(seconds: float | PullPacer) -> None:
    """Make the SuperNode's Fleet pull loop sleep ``seconds`` (or what a :class:`PullPacer` says)
    instead of its fixed 3 s after a pull that found nothing (Flower 1.42 offers no setting: the
    module's ``time`` is wrapped)."""
    import flwr.supernode.start_client_internal as sci

    if isinstance(seconds, PullPacer):
        interval = seconds.interval
        pacer: PullPacer | None = seconds
    else:
        if not 0.05 <= seconds <= 60.0:
            raise ValueError(f"--fleet-pull-interval: must be in 0.05..60 s, got {seconds}")
        fixed = float(seconds)
        interval, pacer = (lambda: fixed), None
    real = time

    def sleep(s: float) -> None:
        if s == FLEET_PULL_SLEEP_S:
            real.sleep(interval())
            return
        if pacer is not None and s == REPLY_WAIT_S:
            pacer.active()
        real.sleep(s)

    shim = SimpleNamespace(sleep=sleep, time=real.time, monotonic=real.monotonic)
    setattr(sci, "time", shim)  # noqa: B010 - the module global its loop reads
