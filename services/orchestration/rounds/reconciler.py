"""The reconciler: re-drives every round whose state has outlived its deadline.

A round moves only when a step message runs (:mod:`.machine`). A message lost with Redis, a
worker killed mid-step, or a step that could not schedule its successor would leave the round
where it is; the reconciler, a thread of the orchestration worker, looks every
``MOTS_RECONCILE_INTERVAL_S`` for unfinished rounds past their state's deadline (plus one
interval of grace, so a step about to move the round is not raced) and sends that state's step
again. A duplicated step is harmless: moves are compare-and-set. While a round stays overdue it
is re-driven at most once per ``resend_after_s``, so a long step is not buried in copies. A step
waiting for a call's reply is re-driven once that call is past its timeout with no answer (its
task, its worker or its reply was lost): the step then finds the call lost and runs again, as a
step whose call got no answer always has.

It also runs the market continuously when ``MOTS_ROUND_INTERVAL_S`` is set: once no round is in
flight and the latest ended that many seconds ago, it opens the next one (until
``MOTS_ROUNDS_MAX`` rounds exist), and applies the artifacts' retention (:mod:`.retention`). The worker wakes it when a round ends, so back-to-back rounds
(interval 0) start at once; as the schedule lives in the database, no lost message can stop it.
"""

from __future__ import annotations

import logging
import threading

from mots.platform.api.base import RoundState
from services.orchestration.rounds import prometheus, retention
from services.orchestration.rounds.machine import deadline_of
from services.orchestration.rounds.ports import RoundInFlight, RoundPorts

log = logging.getLogger(__name__)


class Reconciler:
    """Finds overdue rounds through the ports' store and schedules their step again."""

    def __init__(self, ports: RoundPorts, resend_after_s: float = 30.0) -> None:
        self.ports = ports
        self.resend_after_s = resend_after_s
        self._sent: dict[tuple[int, RoundState], float] = {}
        self._lost: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()

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
        redriven.extend(self._lost_calls(now))
        self._sent = {key: at for key, at in self._sent.items() if key in pending}
        if not pending:
            self.open_next()
        retention.sweep(self.ports)
        return redriven

    def _lost_calls(self, now: float) -> list[int]:
        """Re-drive, once each, the steps whose call is past its timeout with no answer."""
        if self.ports.calls is None:
            return []
        redriven, overdue = [], self.ports.calls.overdue(now)
        self._lost &= {call_id for _, _, call_id in overdue}
        for round_id, state, call_id in overdue:
            if call_id in self._lost:
                continue
            log.warning(
                "round %s: %s's call %s is past its timeout", round_id, state.value, call_id
            )
            self.ports.schedule(round_id, state, 0.0)
            self._lost.add(call_id)
            redriven.append(round_id)
        return redriven

    def open_next(self) -> int | None:
        """Open the next scheduled round if one is due; its id, or None."""
        settings, store = self.ports.settings, self.ports.store
        if settings.round_interval_s is None:
            return None
        latest = store.latest(1)
        if latest:
            last = latest[0]
            if settings.rounds_max is not None and last.id >= settings.rounds_max:
                return None
            ended = last.state_entered_at.timestamp()
            if self.ports.clock() < ended + settings.round_interval_s:
                return None
        try:
            round_id = store.create()
        except RoundInFlight:  # a round was opened by hand meanwhile
            return None
        log.info("round %s: opened by the schedule", round_id)
        self.ports.schedule(round_id, RoundState.OPEN, 0.0)
        return round_id

    def wake(self) -> None:
        """Run a pass now (a round has just ended)."""
        self._wake.set()

    def run(self) -> None:
        """Tick every interval (or when woken) until stopped; a failed pass (database or broker
        away) is logged and the next one tries again."""
        interval = self.ports.settings.reconcile_interval_s
        while not self._stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.tick()
            except Exception:
                log.warning("reconciler pass failed; next in %.1fs", interval, exc_info=True)

    def start(self) -> None:
        """Run in a daemon thread (named ``background:``: the path tracer lists it apart)."""
        threading.Thread(target=self.run, name="background:reconciler", daemon=True).start()

    def stop(self) -> None:
        """End the thread's loop."""
        self._stop.set()
        self._wake.set()
