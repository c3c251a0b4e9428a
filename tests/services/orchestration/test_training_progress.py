"""What the round API shows of a training under way, and how the demo prints it."""

from __future__ import annotations

import json
import math

from mots.local.demo import fedavg_line
from mots.training.progress import RoundProgress
from services.orchestration.products import progress_of


def test_a_finished_fedavg_round_is_one_based_json_and_printed_as_such() -> None:
    body = progress_of(RoundProgress(2, 5, 10, 10, 0.6789, 4.25)).model_dump(mode="json")
    assert json.loads(json.dumps(body)) == body
    assert body == {
        "fedavg_round": 3,
        "fedavg_rounds": 5,
        "clients_done": 10,
        "clients": 10,
        "epsilon": 0.6789,
        "round_seconds": 4.25,
        "in_progress": False,
    }
    assert fedavg_line(body) == "FedAvg round 3/5: 10/10 clients, ε 0.6789, 4.2 s"


def test_no_epsilon_yet_is_null_not_nan() -> None:
    """Before the first model is evaluated the engines report ε = NaN, which JSON cannot carry."""
    progress = progress_of(RoundProgress(0, 5, 3, 10, math.nan, 1.0, partial=True))
    body = progress.model_dump(mode="json")
    assert body["epsilon"] is None and body["in_progress"] is True
    json.dumps(body, allow_nan=False)
    assert fedavg_line(body) == "FedAvg round 1/5: 3/10 clients, ε –, 1.0 s"
