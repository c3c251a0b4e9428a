"""The Fleet pull's pace (mots.training.fleet_pull): Flower's 3 s while a node is idle, a
quarter second while it is in a run, or a fixed --fleet-pull-interval."""

from __future__ import annotations

import pytest

from mots.training import fleet_pull, warm_node


def test_fleet_pull_interval_replaces_only_the_fixed_three_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flwr.supernode.start_client_internal as sci

    monkeypatch.setattr(sci, "time", sci.time)  # restored after the test
    slept: list[float] = []
    monkeypatch.setattr(fleet_pull.time, "sleep", slept.append)
    fleet_pull.set_fleet_pull_interval(0.5)
    sci.time.sleep(3)
    sci.time.sleep(0.5)
    assert slept == [0.5, 0.5]
    with pytest.raises(ValueError, match="--fleet-pull-interval"):
        fleet_pull.set_fleet_pull_interval(0.0)


def test_the_pull_sleeps_briefly_only_while_the_node_is_in_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Idle: Flower's 3 s after an empty pull. After a received message (the SuperNode's line)
    or a wait for the ClientApp's reply: ACTIVE_PULL_S, until ACTIVE_WINDOW_S have passed."""
    import logging
    import threading

    import flwr.supernode.start_client_internal as sci

    monkeypatch.setattr(sci, "time", sci.time)  # restored after the test
    slept: list[float] = []
    monkeypatch.setattr(fleet_pull.time, "sleep", slept.append)
    now = [1000.0]
    monkeypatch.setattr(fleet_pull.time, "monotonic", lambda: now[0])
    pacer = fleet_pull.PullPacer()
    fleet_pull.set_fleet_pull_interval(pacer)
    sci.time.sleep(3)  # idle
    signal = warm_node.ReceivedSignal(threading.Event(), pacer)
    signal.emit(logging.LogRecord("flwr", logging.INFO, "", 0, "Received successfully", (), None))
    sci.time.sleep(3)  # in a run
    now[0] += fleet_pull.ACTIVE_WINDOW_S + 1
    sci.time.sleep(3)  # idle again
    sci.time.sleep(0.5)  # waiting for a reply: in a run
    sci.time.sleep(3)
    active = fleet_pull.ACTIVE_PULL_S
    assert slept == [3.0, active, 3.0, 0.5, active]
