"""Every example of docs/errors.md and docs/cli.md runs as written (issue 40, deliverable 3).

Each fenced block's command lines (``$ …`` in a ``console`` or ``text`` block, every line of a
``bash`` block) run verbatim under ``bash`` against one platform started by ``mots platform up
--detach --free-ports`` on a temporary workdir, in a shell set up as the README's journeys set up
theirs (``MOTS_WORKDIR`` the operator's folder, ``MOTS_PROFILES`` a file holding the client
profiles ``pi-1`` and ``alice``), from a folder where ``.venv`` and ``examples`` are this
checkout's. The output a block gives after a ``$`` line must be what the line prints (``…`` stands
for any text, a JSON line is compared key by key), and ``echo "exit $?"`` the exit status the docs
give. The lines that start processes for minutes are listed in :data:`NOT_RUN_HERE`, each with
the test that runs it instead; the JSON problem at the top of docs/errors.md is an API answer,
not a command, and is produced here by the request it describes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.services.orchestration.conftest import stack_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
DOCS = ("docs/errors.md", "docs/cli.md")
BIN = Path(sys.executable).parent
REQUEST_ID = "5f0c2b6e9d8a4c1f8e7d6c5b4a392817"  # the id docs/errors.md's examples name
NOT_RUN_HERE = {
    "make install": "installs the virtualenv this test runs in",
    "mots platform up --detach --free-ports --workdir /tmp/mots": "a second platform beside "
    "this test's own (tests/mots/local/ start and stop platforms; the lines below run on this "
    "test's)",
    "schemathesis ": "every check over every operation: minutes (tests/services/test_spec_truth.py "
    "runs it against each API with both tokens)",
    "mots train -k 2,0,5 --artifacts": "a full training, 5 rounds on Fashion-MNIST "
    "(tests/mots/cli/test_help_long_examples.py runs `mots train -k 2,0,5`)",
    "mots sweep ": "the Fig. 5 grid: minutes (tests/mots/training/test_sweep.py)",
    "mots federation up": "starts a Flower federation that runs until `federation down` "
    "(tests/mots/training/test_federation.py, test_federation_own_data.py)",
    "mots train -k 2,0,5 --engine deployment": "trains on that federation "
    "(tests/mots/cli/test_help_long_examples.py, tests/mots/cli/test_progress.py)",
    "mots federation down": "stops that federation (tests/mots/training/test_federation.py)",
    "make bench-training": "20 SuperNodes, minutes (tests/benchmarks/test_bench_training.py)",
    "make bench-solver": "the solver benchmark (tests/benchmarks/test_bench_solver.py)",
}
"""Example lines (by their start) not run here, and where they are run instead."""


def _blocks(text: str) -> Iterator[tuple[str, list[str]]]:
    """(language, lines) of each fenced block of a Markdown text."""
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S):
        yield match.group(1), match.group(2).splitlines()


def examples(doc: str) -> list[tuple[str, list[str]]]:
    """(command line, the output the doc gives for it) for every example of ``doc``."""
    found: list[tuple[str, list[str]]] = []
    for lang, lines in _blocks((ROOT / doc).read_text(encoding="utf-8")):
        if lang == "bash":
            found += [(line, []) for line in lines if line.strip() and not line.startswith("#")]
        elif lang in ("console", "text"):
            output: list[str] | None = None  # the output of this block's last `$` line
            for line in lines:
                if line.startswith("$ "):
                    output = []
                    found.append((line[2:], output))
                elif output is not None:
                    output.append(line)
    return found


def _skipped(command: str) -> str | None:
    bare = command.removeprefix(".venv/bin/")
    return next((why for start, why in NOT_RUN_HERE.items() if bare.startswith(start)), None)


def _pattern(expected: str) -> re.Pattern[str]:
    """``expected`` with each ``…`` standing for any text."""
    return re.compile(".*?".join(re.escape(part) for part in expected.split("…")) + r"\Z")


def _same(expected: object, got: object) -> bool:
    """A JSON value of the docs against the one printed: strings with ``…`` as patterns."""
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and set(expected) == set(got)
            and all(_same(v, got[k]) for k, v in expected.items())
        )
    if isinstance(expected, str) and "…" in expected:
        return isinstance(got, str) and _pattern(expected).match(got) is not None
    return expected == got


def _matches(expected: str, got: str) -> bool:
    if expected.startswith("{"):
        try:
            return _same(json.loads(expected), json.loads(got))
        except ValueError:
            return False
    return _pattern(expected).match(got) is not None


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One platform, its operator's workdir, the profiles pi-1 and alice, and a folder to run
    the examples from; yields the shell's environment (``cwd`` its folder)."""
    base = tmp_path_factory.mktemp("doc-examples")
    work, here = base / "platform", base / "shell"
    here.mkdir()
    (here / ".venv").symlink_to(ROOT / ".venv")
    (here / "examples").symlink_to(ROOT / "examples")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MOTS_") and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(stack_env())
    env.update(
        PATH=f"{BIN}:{env.get('PATH', '')}",
        MOTS_PROFILES=str(base / "profiles.toml"),
        COLUMNS="200",
    )
    up = subprocess.run(
        [str(BIN / "mots"), "platform", "up", "--detach", "--free-ports", "--no-prometheus",
         "--workdir", str(work)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        env["MOTS_WORKDIR"] = str(work)
        for name in ("pi-1", "alice"):
            code = _run(
                "mots market enrol --type small --data-size 50 --cost 0.5 --json", env, False
            )
            enrolment = json.loads(code.stdout)["code"]
            saved = _run(
                f"mots market register --name {name} --code {enrolment} --save-as {name}", env
            )
            assert saved.returncode == 0, saved.stdout
        env["cwd"] = str(here)
        yield env
    finally:
        subprocess.run(
            [str(BIN / "mots"), "platform", "down", "--workdir", str(work)],
            env=env, capture_output=True, timeout=120, check=False,
        )  # fmt: skip


def _run(line: str, env: dict[str, str], merged: bool = True) -> subprocess.CompletedProcess[str]:
    shell_env = {k: v for k, v in env.items() if k != "cwd"}
    return subprocess.run(
        ["bash", "-c", line],
        env=shell_env,
        cwd=env.get("cwd"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,  # as a terminal shows them
        text=True,
        timeout=300,
        check=False,
    )


def test_every_example_of_the_error_and_cli_docs_runs_as_written(shell: dict[str, str]) -> None:
    """Each example line exits as the docs say (0 where they give no error) and prints what
    they give after it, line by line; the logs hold the refusal of the request id they name."""
    market = json.loads((Path(shell["MOTS_WORKDIR"]) / "endpoints.json").read_text())["market"]
    refused = httpx.get(
        f"{market}/v1/me/balance",
        headers={"Authorization": "Bearer mots.99.1.x", "X-Request-ID": REQUEST_ID},
    )
    assert refused.status_code == 401 and refused.headers["X-Request-ID"] == REQUEST_ID
    ran: list[str] = []
    for doc in DOCS:
        for line, expected in examples(doc):
            if _skipped(line):
                continue
            result = _run(line, shell)
            got = result.stdout.strip().splitlines()
            said = f"{doc}: `{line}` printed:\n{result.stdout}"
            assert "Traceback" not in said, said
            if not expected:
                assert result.returncode == 0, said
            errors = [x for x in expected if x.startswith("Error: ")]
            if errors and "echo" not in line:  # a refusal exits 1, a role or usage error 2
                assert result.returncode == (1 if re.match(r"Error: \d{3}: ", errors[0]) else 2), (
                    said
                )
            assert len(got) >= len(expected), said
            for want, have in zip(expected, got[-len(expected) :] if expected else [], strict=True):
                assert _matches(want, have), f"{said}\nexpected: {want}\ngot:      {have}"
            ran.append(f"{doc}: {line}")
    print("\n".join(ran))
    assert len(ran) >= 10, ran


def test_the_problem_example_of_docs_errors_md_is_what_a_rotated_token_gets(
    shell: dict[str, str],
) -> None:
    """docs/errors.md's first example, the problem a token replaced by a newer one gets: the
    same keys, code, type, title, status and detail (only the request id differs)."""
    text = (ROOT / "docs/errors.md").read_text(encoding="utf-8")
    example = json.loads("\n".join(next(b for lang, b in _blocks(text) if lang == "json")))
    market = json.loads((Path(shell["MOTS_WORKDIR"]) / "endpoints.json").read_text())["market"]
    profiles = (Path(shell["MOTS_PROFILES"])).read_text()
    token = re.search(r'\[profiles\.alice\][^\[]*?token = "([^"]+)"', profiles, flags=re.S)
    assert token is not None, profiles
    old = {"Authorization": f"Bearer {token.group(1)}"}
    renewed = httpx.post(f"{market}/v1/me/token", headers=old)
    assert renewed.status_code in (200, 201), renewed.text
    got = httpx.get(f"{market}/v1/me", headers=old).json()
    assert set(got) == set(example)
    assert {k: got[k] for k in example if k != "request_id"} == {
        k: v for k, v in example.items() if k != "request_id"
    }
