"""Each emulated edge device's own data on its host, as an operator prepares it (docs/deploy.md
"Each device's own data"): one folder per task, cut from the task's public set by `mots data
split` (the same samples the former ``client-index`` slice held), moved to where the device's
containers mount it from. Used by the compose round (``ROOT/<device>/<task>``, docker/compose.yaml's
``${MOTS_EDGE_DATA_ROOT}``) and the kube play round (``<Pi's disk>/srv/mots/<task>``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

TASKS = ("fashion-mnist", "digits")
"""The tasks every shipped edge device holds a folder for (its containers' ``--data``)."""
SIZES = (50, 120, 300)
"""D_i of the shipped edge types (type-1, type-2, type-3), each device's folder at least that."""
MOTS = str(Path(sys.executable).with_name("mots"))


def split_for_devices(devices: Mapping[str, str], work: Path) -> dict[str, dict[str, Path]]:
    """Cut each task's folders for ``devices`` (name → client type, e.g. ``type-2``) with the
    `mots data split` command a user runs; return device → task → folder (under ``work``)."""
    counts = [0] * len(SIZES)
    which: dict[str, str] = {}
    for name, type_name in devices.items():
        i = int(type_name.removeprefix("type-")) - 1
        which[name] = f"type-{i + 1}-{counts[i]:03d}"  # mots.tasks.split.folder_name
        counts[i] += 1
    out: dict[str, dict[str, Path]] = {name: {} for name in devices}
    if not devices:  # a tier without edge pods (kube play's data tier alone) holds no data
        return out
    for task in TASKS:
        subprocess.run(
            [MOTS, "data", "split", task, str(work / task), "--sizes",
             ",".join(map(str, SIZES)), "--counts", ",".join(map(str, counts))],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        for name in devices:
            out[name][task] = work / task / which[name]
    return out


def prepare(devices: Mapping[str, str], dest: Mapping[str, Path], work: Path) -> None:
    """Put each device's folders at ``dest[device] / <task>`` (the device host's data root)."""
    for name, folders in split_for_devices(devices, work).items():
        for task, folder in folders.items():
            target = dest[name] / task
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(target, ignore_errors=True)
            shutil.move(str(folder), target)
