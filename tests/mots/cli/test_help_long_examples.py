"""The --help example lines that start processes for long (NOT_RUN_HERE of test_journeys): each
runs here as written (issue 26, item 4), in a fresh folder, or is listed in NEVER_RUN with why.

Paths are the only change: ``out/…`` lands in the test's folder (the command's working
directory) and ``/tmp/mots``, ``/tmp/r`` become folders of the test's own. The federation
lines keep their default ports (SuperLink 9500 and up), as a user would: they fail while
another federation holds them.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mots.cli.test_journeys import NOT_RUN_HERE, _examples
from tests.services.orchestration.conftest import stack_env

MOTS = str(Path(sys.executable).with_name("mots"))
ROOT = Path(__file__).resolve().parents[3]

RUN: list[tuple[str, float]] = [
    # (line as in the help, seconds allowed); in the comment, seconds this test took here at
    # f6b5872 (2 cores shared with three other engineers, load average 20; 334 s in all)
    ("mots train -k 2,0,5 --rounds 20", 120),  # 8.2
    ("mots sweep --out out/sweep --rounds 20 --seeds 1 --k1-max 4", 180),  # 25.8
    ("mots sweep --out out/sweep --coalition 2,0,5 --coalition 4,2,0 --rounds 50", 180),  # 41.3
    ("mots demo --trainer inprocess --nodes 20", 240),  # 45.8
    ("mots reproduce --quick --rounds 10 --settings iid_logistic --out /tmp/r", 240),  # 34.9
    ("mots federation up --nodes 4 --counts 2,1,1 --workdir out/fed", 180),  # 18.5
    ("mots federation status --workdir out/fed", 60),  # 1.6
    ("mots federation status --workdir out/fed --json", 60),  # 1.3
    ("mots federation down --workdir out/fed", 120),  # 1.7
    ("mots federation up --workdir out/fed", 240),  # 51.9 (20 SuperNodes)
    ("mots train -k 2,0,5 --engine deployment --workdir out/fed --rounds 5", 240),  # 42.2
    ("mots federation down --workdir out/fed", 120),  # 4.6
    ("mots federation up --nodes 20 --counts 10,5,5 --workdir out/fed", 240),  # 9.1
    ("mots federation down --workdir out/fed", 120),  # 10.6
    ("mots platform up --detach --free-ports --workdir /tmp/mots", 240),  # 24.2
    ("mots platform down --workdir /tmp/mots", 120),  # 6.8
]
"""Lines run here, in this order (a federation or platform up, then used, then down)."""

NEVER_RUN: dict[str, str] = {
    "mots demo --trainer inprocess": "the --nodes 20 line (its default), which runs here",
    "mots demo --train-rounds 5 --out out/demo": "20 Flower SuperNodes, the platform and 5 "
    "rounds on the deployment engine: 157 s here (load 31), 50 s on a quiet machine; what "
    "`make demo` runs (tests/mots/local/test_demo.py runs the demo)",
    "mots reproduce --quick": "every setting of the paper's evaluation, CNN included: minutes "
    "to an hour (`make reproduce`); its --rounds 10 iid_logistic line runs here",
    "mots reproduce --full --seeds 30": "the paper's protocol: hours to days on CPU",
    "mots model verify mots-round-1.pt2 --public-key market-key.json": "needs the market's key "
    "saved from its /.well-known/mots-model-key first; tests/services/market/"
    "test_model_signing.py runs `mots model verify` with it",
}
"""Long lines not run here, and why."""


def _long_lines() -> list[str]:
    """Every help example line that test_journeys does not run (its NOT_RUN_HERE), once each."""
    skip = ("mots COMMAND", "export ")
    lines = [line for _, line in _examples() if line.startswith(tuple(NOT_RUN_HERE))]
    return list(dict.fromkeys(line for line in lines if not line.startswith(skip)))


def test_every_long_example_is_run_here_or_says_why_not() -> None:
    """A new long example must be added to RUN or NEVER_RUN (with its reason)."""
    lines = _long_lines()
    run = {line for line, _ in RUN}
    assert set(lines) == run | set(NEVER_RUN), (
        set(lines) - run - set(NEVER_RUN),
        (run | set(NEVER_RUN)) - set(lines),
    )
    assert not run & set(NEVER_RUN)


@pytest.mark.slow
@pytest.mark.integration
def test_the_long_examples_run_as_written(tmp_path: Path) -> None:
    """Each RUN line in a shell, from a fresh folder (the platform with stack_env's small round
    settings), in order:
    exit 0 within its time, no traceback, and what it says it wrote is there; platform and
    federation stopped whatever happens."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    env = {**os.environ, "PATH": f"{Path(MOTS).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MOTS_OPERATOR_TOKEN", None)  # the platform makes its own
    env["PYTHONPATH"] = f"{ROOT / 'shared'}{os.pathsep}{ROOT}"
    paths = {"/tmp/mots": str(tmp_path / "mots"), "/tmp/r": str(tmp_path / "r")}
    taken: list[tuple[str, float]] = []
    try:
        for line, limit in RUN:
            command = line
            for old, new in paths.items():
                command = command.replace(old, new)
            start = time.monotonic()
            small = stack_env() if line.startswith("mots platform") else {}  # its market's
            done = subprocess.run(
                command, shell=True, cwd=folder, env={**env, **small}, capture_output=True,
                text=True, timeout=limit,
            )  # fmt: skip
            taken.append((line, round(time.monotonic() - start, 1)))
            assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])
            assert "Traceback" not in done.stderr, (line, done.stderr[-3000:])
        for made in ("out/sweep/sweep.json", "out/demo/summary.json"):
            assert (folder / made).is_file(), made
        demo = json.loads((folder / "out/demo/summary.json").read_text())
        assert 0 < demo["round_calls"] <= 7, demo  # issue 38: the demo round's call log
        assert (tmp_path / "r" / "report.md").is_file()
    finally:
        for stop in (f"{MOTS} federation down --workdir out/fed",
                     f"{MOTS} platform down --workdir {shlex.quote(paths['/tmp/mots'])}"):  # fmt: skip
            subprocess.run(stop, shell=True, cwd=folder, env=env, capture_output=True, timeout=120)
        print(f"seconds per line: {taken}")
