"""`mots rounds show|watch` say what happened (issue 26 item 5): each state with the time the
round spent in it, and no `0/None FedAvg rounds` before training reports."""

from __future__ import annotations

import pytest

from mots.cli.rounds import _follow, describe
from mots.platform.api.rounds import RoundDetail

BARE = {
    "id": 1,
    "state": "published",
    "mechanism": None,
    "rule": None,
    "created_at": "2026-11-26T16:00:00Z",
    "summary": None,
    "training_progress": None,
    "quote": None,
    "scenario": None,
    "transitions": [],
}


def _view(**kw: object) -> RoundDetail:
    return RoundDetail.model_validate({**BARE, **kw})


def test_the_timeline_labels_each_state_with_its_own_time() -> None:
    """48.5 s of training shows as training, not as the next state."""
    moves = [
        ("open", "collecting", 0.4),
        ("collecting", "training", 4.7),
        ("training", "evaluating", 48.5),
        ("evaluating", "settling", 7.4),
        ("settling", "published", 0.2),
    ]
    at = "2026-11-26T16:00:00Z"
    v = _view(
        transitions=[
            {"from": a, "to": b, "seconds_in_from": s, "note": None, "at": at} for a, b, s in moves
        ]
    )
    line = describe(v).splitlines()[-1]
    assert line == (
        "states: open 0.4 s → collecting 4.7 s → training 48.5 s → evaluating 7.4 s"
        " → settling 0.2 s → published"
    )


def test_the_watch_bar_never_prints_none(capsys: pytest.CaptureFixture[str]) -> None:
    """Before training reports, the bar shows the state alone (no `0/None`)."""
    last = _follow(iter([_view(state="collecting")]), as_json=False)
    assert last.state.value == "collecting"
    out = capsys.readouterr()
    assert "round 1: collecting" in out.out and "None" not in out.out + out.err


def test_the_watch_bar_counts_finished_fedavg_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    """Round 2 of 5 in progress: 1/5 FedAvg rounds done."""
    progress = {
        "fedavg_round": 2,
        "fedavg_rounds": 5,
        "clients_done": 1,
        "clients": 2,
        "epsilon": None,
        "round_seconds": 1.0,
        "in_progress": True,
    }
    _follow(iter([_view(state="training", training_progress=progress)]), as_json=False)
    assert "1/5 FedAvg rounds" in capsys.readouterr().out


def test_a_round_settled_by_rule_shows_no_rewards_as_paid() -> None:
    """Issue 40: a failed round's quoted rewards are not printed as if paid; the output says
    nothing was paid or charged and every buyer was refunded."""
    from mots.platform.api.rounds import SUMMARY_EXAMPLE

    failed = {**SUMMARY_EXAMPLE, "state": "settled_by_rule", "rule": "training failed"}
    text = describe(_view(state="settled_by_rule", rule="training failed", summary=failed))
    assert not any(line.startswith("rewards ") for line in text.splitlines()), text
    assert "no reward paid, no charge made, every buyer refunded (settled by rule)" in text
    published = describe(_view(summary=SUMMARY_EXAMPLE))
    assert "rewards type-1 -0.250000, type-2 0.450000, type-3 2.250000" in published


def test_a_passed_deadline_is_said_to_have_passed() -> None:
    """Issue 40: a deadline in the past reads `163 s ago`, never `-163 s from now`."""
    from mots.cli.client import from_now

    assert from_now(-163.2) == "163 s ago" and from_now(58.4) == "in 58 s"
    v = _view(state="collecting", deadlines={"collecting": "2026-11-26T16:00:00Z"})
    text = describe(v)
    assert "from now" not in text and " s ago)" in text, text


def test_show_names_the_task_and_its_pinned_version() -> None:
    """Issue 36: the round's task and the version it was opened on (every step uses that one)
    are the second line; a round opened before the pin says so instead of a version."""
    text = describe(_view(task="digits", task_version=2))
    assert text.splitlines()[1] == "task digits, version 2 (pinned when the round opened)"
    old = describe(_view(task="digits"))
    assert old.splitlines()[1] == "task digits, version not pinned (its latest)"
