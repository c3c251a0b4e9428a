"""The reconciler: re-drives every round whose state has outlived its deadline.

A round moves only when a step message runs (:mod:`.machine`). A message lost with Redis, a
worker killed mid-step, or a step that could not schedule its successor would leave the round
where it is; the reconciler, a thread of the orchestration worker, looks every
``MOTS_RECONCILE_INTERVAL_S`` for unfinished rounds past their state's deadline (plus one
interval of grace, so a step about to move the round is not raced) and sends that state's step
again. A duplicated step is harmless: moves are compare-and-set. While a round stays overdue it
is re-driven at most once per ``resend_after_s``, so a long step is not buried in copies.
"""

from __future__ import annotations

import logging
import threading

from mots.platform.schemas import RoundState
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.machine import deadline_of
from services.orchestration.rounds.ports import RoundPorts

log = logging.getLogger(__name__)


class Reconciler:
    """Finds overdue rounds through the ports' store and schedules their step again."""

    def __init__(self, ports: RoundPorts, resend_after_s: float = 30.0) -> None:
        self.ports = ports
        self.resend_after_s = resend_after_s
        self._sent: dict[tuple[int, RoundState], float] = {}

    def tick(self) -> list[int]:
        """One pass: the ids of the rounds re-driven now."""
        now = self.ports.clock()
        grace = self.ports.settings.reconcile_interval_s
        redriven, pending = [], set()
        for round_id, state in self.ports.store.unfinished():
            pending.add((round_id, state))
            rnd = self.ports.store.load(round_id)
            if rnd is None or rnd.state != state:
                continue
            overdue = now - deadline_of(rnd, self.ports.settings)
            last = self._sent.get((round_id, state))
            if overdue <= grace or (last is not None and now - last < self.resend_after_s):
                continue
            log.warning(
                "round %s: %s is %.1fs past its deadline; re-driving",
                round_id,
                state.value,
                overdue,
            )
            self.ports.schedule(round_id, state, 0.0)
            self._sent[(round_id, state)] = now
            prometheus.redriven(state)
            redriven.append(round_id)
        self._sent = {key: at for key, at in self._sent.items() if key in pending}
        return redriven

    def run(self, stop: threading.Event) -> None:
        """Tick every interval until ``stop`` is set; a failed pass (database or broker away)
        is logged and the next one tries again."""
        while not stop.wait(self.ports.settings.reconcile_interval_s):
            try:
                self.tick()
            except Exception:
                log.warning("reconciler pass failed; next in %.1fs",
                            self.ports.settings.reconcile_interval_s, exc_info=True)  # fmt: skip

    def start(self) -> threading.Event:
        """Run in a daemon thread; set the returned event to stop it."""
        stop = threading.Event()
        threading.Thread(target=self.run, args=(stop,), name="reconciler", daemon=True).start()
        return stop
