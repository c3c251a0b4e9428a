"""Retention on fakes: the last N rounds' artifacts stay, and those a buyer or participant may
still download (within the download window); the rest are deleted and their rows marked."""

from __future__ import annotations

from pathlib import Path

from mots.platform.api.base import RoundState
from services.orchestration.rounds.reconciler import Reconciler
from services.orchestration.rounds.retention import sweep
from tests.services.orchestration.rounds.fakes import Rig, rig


def _rounds(r: Rig, n: int, root: Path) -> list[Path]:
    """Run ``n`` rounds whose trainer writes a real artifact directory under ``root``."""
    dirs = []
    for _ in range(n):
        round_id = r.start()
        r.trainer.artifact_root = root
        r.run()
        rnd = r.store.load(round_id)
        assert rnd is not None and rnd.state == RoundState.PUBLISHED and rnd.training is not None
        dirs.append(Path(rnd.training.artifact_path).parent)
    return dirs


def test_only_the_last_rounds_and_the_download_window_are_kept(tmp_path: Path) -> None:
    """Five rounds, keep 2, a 100 s window: nothing goes while every round is within the window;
    an hour later rounds 1-3 lose their files (rows marked) and 4-5 keep theirs; a second sweep
    finds nothing more."""
    r = rig(artifact_retention_rounds=2, download_window_s=100.0)
    dirs = _rounds(r, 5, tmp_path)
    assert all(d.is_dir() for d in dirs)
    assert sweep(r.machine.ports) == []  # everyone may still download
    r.clock.now += 3600.0
    assert sweep(r.machine.ports) == [3, 2, 1]
    assert [d.exists() for d in dirs] == [False, False, False, True, True]
    marked = [r.store.rounds[i].artifact_expired_at is not None for i in range(1, 6)]
    assert marked == [True, True, True, False, False]
    assert sweep(r.machine.ports) == []


def test_without_a_retention_setting_every_artifact_stays(tmp_path: Path) -> None:
    """Unset MOTS_ARTIFACT_RETENTION_ROUNDS: the reconciler's passes delete nothing."""
    r = rig()
    dirs = _rounds(r, 3, tmp_path)
    r.clock.now += 10 * 86400.0
    Reconciler(r.machine.ports).tick()
    assert all(d.is_dir() for d in dirs)
