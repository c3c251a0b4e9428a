"""The local federation's devices' data per task: the devices' own folders under
MOTS_DEVICE_DATA_DIR where it holds the task, else folders cut from the task's public set."""

from __future__ import annotations

from pathlib import Path

from services.orchestration.core.config import Settings
from services.orchestration.task_trainer import device_folders, own_folders


def test_the_devices_own_folders_are_used_where_the_setting_holds_the_task(
    tmp_path: Path,
) -> None:
    """A task with a folder under MOTS_DEVICE_DATA_DIR trains on it (nothing is cut); a task
    without one, or no setting at all, falls back to the public set's cut."""
    (tmp_path / "own" / "rings" / "type-1-000").mkdir(parents=True)
    settings = Settings(device_data_dir=str(tmp_path / "own"))
    own = own_folders(settings, "rings")
    assert own == tmp_path / "own" / "rings"
    cut = tmp_path / "federation" / "data"
    assert device_folders("rings", cut, [40.0], [0], settings) == str(own)
    assert not cut.exists()  # nothing was cut from a public set
    assert own_folders(settings, "digits") is None
    assert own_folders(Settings(), "rings") is None
