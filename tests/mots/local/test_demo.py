"""The demo's printout says, per participant, whether its updates were verified."""

from __future__ import annotations

import pytest

from mots.local.demo import print_verification


def test_each_participant_is_shown_verified_and_paid_or_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Verified participants are paid; dropped and failed ones are not; ordered by client id."""
    print_verification(
        {"verification": {"12": "verified", "3": "failed_verification", "7": "dropped"}}
    )
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines()[1:]]
    assert lines == [
        ["client", "3", "failed_verification", "not", "paid"],
        ["client", "7", "dropped", "not", "paid"],
        ["client", "12", "verified", "paid"],
    ]
    print_verification({"verification": {}})
    assert capsys.readouterr().out == ""


def test_the_security_line_is_true_of_the_engine(capsys: pytest.CaptureFixture[str]) -> None:
    """TLS and SuperNode authentication are claimed only for Flower's deployment engine."""
    print_verification({"verification": {"1": "verified"}, "trainer": "inprocess"})
    line = capsys.readouterr().out.splitlines()[0]
    assert "TLS and SuperNode authentication" not in line and "in-process" in line
    print_verification({"verification": {"1": "verified"}, "trainer": "deployment"})
    assert "TLS and SuperNode authentication" in capsys.readouterr().out
