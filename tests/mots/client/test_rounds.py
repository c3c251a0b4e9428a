"""The round SDK: typed views, paged lists followed to their end, watching until a round ends.

The orchestration's side is ``httpx.MockTransport`` (the network's edge); the SDK against the
real service runs in tests/mots/cli/test_journeys.py.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mots.client.rounds import OrchestrationError, RoundsClient
from mots.platform.api.base import RoundState


def _round(rid: int, state: str, progress: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": rid, "state": state, "mechanism": "swan_robust", "rule": None,
        "created_at": "2026-11-26T16:00:00Z", "summary": None, "training_progress": progress,
        "quote": None, "scenario": None, "transitions": [], "a_newer_field": 1,
    }  # fmt: skip


def _progress(done: int, in_progress: bool) -> dict[str, Any]:
    return {
        "fedavg_round": done, "fedavg_rounds": 2, "clients_done": 1, "clients": 2,
        "epsilon": 0.7, "round_seconds": 1.0, "in_progress": in_progress,
    }  # fmt: skip


def _client(handler: Any) -> RoundsClient:
    transport = httpx.MockTransport(handler)
    return RoundsClient("http://rounds.test", "tok", transport=transport, sleep=lambda _: None)


def test_lists_follow_next_pages_and_plain_lists_are_read_too() -> None:
    """A paged answer ({"items", "next"}) is followed until ``limit``; a plain list is one page."""
    seen: list[dict[str, str]] = []

    def paged(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.url.params))
        if "cursor" not in request.url.params:
            return httpx.Response(200, json={"items": [_round(3, "open")], "next": "c1"})
        return httpx.Response(200, json={"items": [_round(2, "published")], "next": "c2"})

    views = _client(paged).rounds(limit=2)
    assert [v.id for v in views] == [3, 2] and views[1].finished
    assert seen == [{"limit": "2"}, {"limit": "1", "cursor": "c1"}]
    plain = _client(lambda _: httpx.Response(200, json=[_round(1, "open")])).rounds()
    assert [(v.id, v.state) for v in plain] == [(1, RoundState.OPEN)]


def test_watch_yields_each_change_until_the_round_ends() -> None:
    """Only changes of state or FedAvg progress are yielded; the last view is published."""
    answers = iter(
        [
            _round(5, "collecting"),
            _round(5, "collecting"),
            _round(5, "training", _progress(1, True)),
            _round(5, "training", _progress(1, False)),
            _round(5, "training", _progress(1, False)),
            _round(5, "published", _progress(2, False)),
        ]
    )
    views = list(_client(lambda _: httpx.Response(200, json=next(answers))).watch(5))
    assert [v.state.value for v in views] == ["collecting", "training", "training", "published"]
    assert views[-1].training_progress is not None
    assert views[-1].training_progress.fedavg_round == 2


def test_refusals_and_timeouts() -> None:
    """A 409 carries the service's detail; a missing round is None; watch gives up in time."""
    conflict = httpx.Response(409, json={"detail": "another round is in flight"})
    with pytest.raises(OrchestrationError, match="orchestration answered 409: another round"):
        _client(lambda _: conflict).open_round()
    assert _client(lambda _: httpx.Response(404, json={"detail": "no"})).round(9) is None
    stuck = _client(lambda _: httpx.Response(200, json=_round(5, "training")))
    with pytest.raises(TimeoutError, match="round 5: not finished"):
        list(stuck.watch(5, timeout_s=0))
    with pytest.raises(OrchestrationError, match="unexpected answer"):
        _client(lambda _: httpx.Response(200, json={"id": "x"})).round(1)


def test_the_current_states_deadline() -> None:
    """deadline() is the current state's entry of ``deadlines``; none once the round has ended."""
    body = {
        **_round(5, "collecting"),
        "deadlines": {"open": "1970-01-01T00:00:10Z", "collecting": "1970-01-01T00:01:10.500000Z"},
    }
    view = _client(lambda _: httpx.Response(200, json=body)).round(5)
    assert view is not None and view.deadline() == 70.5
    body = {**body, "state": "published"}
    ended = _client(lambda _: httpx.Response(200, json=body)).round(5)
    assert ended is not None and ended.deadline() is None


def test_the_sdk_reads_the_services_own_models_and_ignores_newer_fields() -> None:
    """A round is read into the round API's own models (mots.platform.api.rounds, which the
    orchestration's routes answer with), typed down to the summary; a field a newer service adds,
    at the top or nested in the summary, is ignored rather than refused."""
    from mots.platform.api.rounds import RoundDetail, RoundSummary

    example = RoundDetail.model_json_schema()["examples"][0]  # the service's documented answer
    newer = {**example, "a_newer_field": 1, "summary": {**example["summary"], "another": 2}}
    view = _client(lambda _: httpx.Response(200, json=newer)).round(3)
    assert type(view) is RoundDetail and isinstance(view.summary, RoundSummary)
    assert view.summary.participants == {"type-1": 0, "type-2": 0, "type-3": 5}
    assert view.transitions[0].to is RoundState.TRAINING and view.finished


def test_a_round_opens_for_a_task() -> None:
    """open_round(task="digits") sends the task; with nothing given the body is empty (the
    service's defaults: fashion-mnist); a round's task reads back."""
    import json

    sent: list[bytes] = []

    def started(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(202, json={"round_id": 4, "state": "open"})

    client = _client(started)
    assert client.open_round(task="digits").round_id == 4
    client.open_round()
    assert json.loads(sent[0])["task"] == "digits" and sent[1] == b""
    body = {**_round(4, "open"), "task": "digits"}
    view = _client(lambda _: httpx.Response(200, json=body)).round(4)
    assert view is not None and view.task == "digits"
