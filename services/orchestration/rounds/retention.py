"""Retention of trained model artifacts: keep the last ``MOTS_ARTIFACT_RETENTION_ROUNDS`` rounds'
files and every file a buyer or participant may still download, delete the rest.

"May still download": the round ended less than ``MOTS_DOWNLOAD_WINDOW_S`` ago (a buyer or a
participant has that long after publication to fetch its model). An expired round's files are
removed and its row marked (``rounds.artifact_expired_at``); the market then answers a download
with 410 Gone (its file is gone). Unset retention keeps everything, as before.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from mots.platform.api.base import TERMINAL_STATES
from services.orchestration.rounds.ports import RoundPorts, RoundRecord

log = logging.getLogger(__name__)
SCAN_BEYOND = 200
"""Finished rounds looked at past the kept ones in one sweep (older ones were swept before)."""


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


def sweep(ports: RoundPorts) -> list[int]:
    """Expire what the policy lets go; the ids of the rounds whose artifacts were removed."""
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
