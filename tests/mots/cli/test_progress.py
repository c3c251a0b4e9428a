"""The long commands' progress bars: counts, ETA and the last report, on stderr (issue 17)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from mots.cli.main import cli
from mots.cli.progress import message_bar, round_bar
from mots.training.progress import RoundProgress


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=120, force_terminal=False), out


def test_the_round_bar_counts_fedavg_rounds_with_an_eta() -> None:
    console, out = _console()
    with round_bar("train K=[2, 0, 5]", total=5, console=console) as report:
        report(RoundProgress(0, 5, 7, 7, 1.2, 0.4))
        report(RoundProgress(1, 5, 3, 7, 1.2, 0.4, partial=True))  # round 2 under way
        report(RoundProgress(1, 5, 7, 7, 0.9, 0.4))
    text = out.getvalue()
    assert "train K=[2, 0, 5]" in text and "2/5" in text and "ETA" in text
    assert "ε 0.9000 · clients 7/7" in text


def test_the_message_bar_follows_done_of_total_counts() -> None:
    console, out = _console()
    with message_bar("sweep", console=console) as report:
        report("sweep 1/4: K=[2, 0, 5] seed=0 ε=0.9000")
        report("sweep 3/4: K=[4, 0, 5] seed=0 ε=0.7000")
        report("fit: no count in this line")
    text = out.getvalue()
    assert "3/4" in text and "ETA" in text and "fit: no count" in text


def test_train_on_its_own_federation_says_so_and_how_to_stop_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--engine deployment` without --workdir announces the processes it starts (and how they
    stop) before training; the engine is replaced here (the real federation is tested in
    tests/mots/training)."""
    calls: list[dict[str, Any]] = []

    class Result:
        epsilon, accuracy, losses, round_seconds = 0.5, 0.8, [0.5], [1.0]
        artifact_path: Path | None = None
        artifact_sha256 = None

    def fake_train(k: list[int], cfg: Any, **kw: Any) -> Result:
        calls.append({"k": k, "rounds": cfg.rounds, **kw})
        kw["progress"](RoundProgress(0, cfg.rounds, sum(k), sum(k), 0.5, 1.0))
        return Result()

    monkeypatch.setattr("mots.training.runner.train_coalition", fake_train)
    got = CliRunner().invoke(
        cli, ["train", "-k", "1,0,1", "--engine", "deployment", "--rounds", "1"]
    )
    assert got.exit_code == 0, got.output
    assert "starting a private Flower federation" in got.stderr
    assert "Ctrl-C stops it" in got.stderr and "mots federation up --workdir" in got.stderr
    assert calls[0]["engine"] == "deployment" and calls[0]["federation"] is None
    assert "ε = 0.5000" in got.stdout


def test_a_run_the_federation_refuses_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`mots train -k 2,0,5 --engine deployment` on a federation with too few SuperNodes (the
    engine's DeploymentError, as a 4-node `mots federation up` gave here): one `Error:` line and
    exit 1, not a traceback (issue 26, item 4); other RuntimeErrors still propagate."""
    from mots.training.deployment import DeploymentError

    def refused(k: list[int], cfg: Any, **kw: Any) -> None:
        raise DeploymentError("ServerApp failed: RunFailedError: before round 1: 3 of 7 remain")

    monkeypatch.setattr("mots.training.runner.train_coalition", refused)
    got = CliRunner().invoke(cli, ["train", "-k", "2,0,5", "--engine", "deployment"])
    assert got.exit_code == 1 and "Traceback" not in got.output, got.output
    assert got.output.strip().splitlines()[-1].startswith("Error: ServerApp failed:")

    def bug(k: list[int], cfg: Any, **kw: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("mots.training.runner.train_coalition", bug)
    got = CliRunner().invoke(cli, ["train", "-k", "2,0,5"])
    assert isinstance(got.exception, RuntimeError) and str(got.exception) == "a bug"
