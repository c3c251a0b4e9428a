"""The reconciler, the orchestration worker's upkeep thread: re-drives every round whose state has
outlived its deadline, opens the next scheduled round, and expires old model artifacts.

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
``MOTS_ROUNDS_MAX`` rounds exist). The worker wakes it when a round ends, so back-to-back rounds
(interval 0) start at once; as the schedule lives in the database, no lost message can stop it.

Every pass also applies the artifacts' retention (:func:`expire_artifacts`): keep the last
``MOTS_ARTIFACT_RETENTION_ROUNDS`` rounds' files and every file a buyer or participant may still
download, delete the rest. "May still download": the round ended less than
``MOTS_DOWNLOAD_WINDOW_S`` ago (a buyer or a participant has that long after publication to fetch
its model). An expired round's files are removed and its row marked
(``rounds.artifact_expired_at``); the market then answers a download with 410 Gone (its file is
gone). Unset retention keeps everything.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from mots.platform.api.base import TERMINAL_STATES, RoundState
from mots.platform.contracts import AdvanceRequest
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.machine import deadline_of
from services.orchestration.rounds.ports import RoundInFlight, RoundPorts, RoundRecord

log = logging.getLogger(__name__)
SCAN_BEYOND = 200
"""Finished rounds looked at past the kept ones in one retention pass (older ones were expired
before)."""


def to_expire(
    newest_first: list[RoundRecord], keep_last: int, window_s: float, now: float
) -> list[RoundRecord]:
    """The rounds whose artifacts go: finished, older than the last ``keep_last`` rounds, ended
    at least ``window_s`` ago, with an artifact not yet expired (pure)."""
    return [
        r
        for r in newest_first[keep_last:]
        if r.state in TERMINAL_STATES
        and r.training is not None
        and r.artifact_expired_at is None
        and r.state_entered_at.timestamp() <= now - window_s
    ]


def remove_artifact(round_id: int, artifact_path: str) -> None:
    """Delete a round's artifact: its ``round-<id>`` directory, else the file and its metadata."""
    path = Path(artifact_path)
    if path.parent.name == f"round-{round_id}":
        shutil.rmtree(path.parent, ignore_errors=True)
        return
    for p in (path, path.with_suffix(".json")):
        p.unlink(missing_ok=True)


def expire_artifacts(ports: RoundPorts) -> list[int]:
    """Expire what the retention policy lets go; the ids of the rounds whose artifacts were
    removed."""
    keep = ports.settings.artifact_retention_rounds
    if keep is None:
        return []
    rounds = ports.store.latest(keep + SCAN_BEYOND)
    gone = []
    for rnd in to_expire(rounds, keep, ports.settings.download_window_s, ports.clock()):
        assert rnd.training is not None
        remove_artifact(rnd.id, rnd.training.artifact_path)
        ports.store.mark_expired(rnd.id)
        log.info("round %s: artifact expired (%s)", rnd.id, rnd.training.artifact_path)
        gone.append(rnd.id)
    return gone


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
            self.ports.schedule(AdvanceRequest(round_id=round_id, state=state), 0.0)
            self._sent[(round_id, state)] = now
            prometheus.redriven(state, prometheus.task_of(rnd))
            redriven.append(round_id)
        redriven.extend(self._lost_calls(now))
        self._sent = {key: at for key, at in self._sent.items() if key in pending}
        if not pending:
            self.open_next()
        expire_artifacts(self.ports)
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
            self.ports.schedule(AdvanceRequest(round_id=round_id, state=state), 0.0)
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
        self.ports.schedule(AdvanceRequest(round_id=round_id, state=RoundState.OPEN), 0.0)
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
