"""The round API's responses: typed OpenAPI schemas, and the JSON the demo and benchmarks read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mots.platform.api.base import RoundState
from mots.platform.api.pricing import PricingResult
from mots.platform.api.rounds import TrainingProgress
from mots.platform.contracts import EvaluationResult
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.settings import DEV_OPERATOR_TOKEN
from services.orchestration.core.config import Settings
from services.orchestration.main import create_app
from services.orchestration.migrations import upgrade
from services.orchestration.rounds.ports import RoundUpdate
from services.orchestration.rounds.sql_store import SqlRoundStore

S = RoundState
OPERATOR = {"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[TestClient, SqlRoundStore]]:
    url = f"sqlite:///{tmp_path / 'orchestration.db'}"
    upgrade(url)
    engine = make_engine(url)
    app = create_app(Settings(database_url=url, redis_key_prefix="mots-api-test:"))
    with TestClient(app, headers=OPERATOR) as c:
        yield c, SqlRoundStore(make_sessionmaker(engine))
    engine.dispose()


def _schema(openapi: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    name = ref["$ref"].rsplit("/", 1)[-1]
    schema: dict[str, Any] = openapi["components"]["schemas"][name]
    return schema


def test_the_round_routes_document_real_fields(api: tuple[TestClient, SqlRoundStore]) -> None:
    """No free-form objects: a round, its summary and its transitions list their fields."""
    client, _ = api
    openapi = client.get("/openapi.json").json()
    ok = "200"
    listed = openapi["paths"]["/v1/rounds"]["get"]["responses"][ok]["content"]["application/json"]
    one = openapi["paths"]["/v1/rounds/{round_id}"]["get"]["responses"][ok]["content"]
    page = _schema(openapi, listed["schema"])
    assert set(page["properties"]) == {"items", "next"}
    rnd = _schema(openapi, page["properties"]["items"]["items"])
    detail = _schema(openapi, one["application/json"]["schema"])
    assert {"id", "state", "summary", "training_progress", "quote", "scenario"} <= set(
        rnd["properties"]
    )
    transition = _schema(openapi, detail["properties"]["transitions"]["items"])
    assert set(transition["properties"]) == {"from", "to", "seconds_in_from", "note", "at"}
    summary = _schema(openapi, rnd["properties"]["summary"]["anyOf"][0])
    assert {"participants", "phase_seconds", "settlement", "equilibrium"} <= set(
        summary["properties"]
    )
    for name in ("RoundOut", "RoundDetail", "RoundSummary", "TrainingProgress", "Scenario"):
        for field, spec in openapi["components"]["schemas"][name]["properties"].items():
            assert spec.get("additionalProperties") is not True, (name, field)


def test_a_round_reads_back_as_the_demo_and_benchmarks_expect(
    api: tuple[TestClient, SqlRoundStore],
) -> None:
    client, store = api
    round_id = store.create()
    store.move(round_id, S.OPEN, S.COLLECTING, "error model: prior", RoundUpdate(mechanism="swan"))
    store.move(round_id, S.COLLECTING, S.TRAINING, "K=[0, 2] B=[4, 0]", RoundUpdate())
    store.record_progress(
        round_id,
        TrainingProgress(
            fedavg_round=1,
            fedavg_rounds=2,
            clients_done=2,
            clients=2,
            epsilon=0.9,
            round_seconds=3.0,
            in_progress=False,
        ),
    )
    body = client.get(f"/v1/rounds/{round_id}").json()
    assert (body["id"], body["state"], body["mechanism"], body["summary"]) == (
        round_id,
        "training",
        "swan",
        None,
    )
    assert body["training_progress"]["fedavg_round"] == 1
    assert [(t["from"], t["to"], t["note"]) for t in body["transitions"]] == [
        ("open", "collecting", "error model: prior"),
        ("collecting", "training", "K=[0, 2] B=[4, 0]"),
    ]
    (listed,) = client.get("/v1/rounds").json()["items"]
    assert "transitions" not in listed and listed["state"] == "training"
    missing = client.get(f"/v1/rounds/{round_id + 1}")
    assert missing.status_code == 404 and "round_id" in missing.json()["detail"]
    assert client.post("/v1/rounds", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_rounds_are_listed_newest_first_a_page_at_a_time(
    api: tuple[TestClient, SqlRoundStore],
) -> None:
    """``limit`` bounds a page, ``next`` leads to the older rounds and is null on the last page;
    a limit beyond the bound or a made-up cursor is a 422 naming the query field."""
    client, store = api
    ids = []
    for _ in range(5):
        ids.append(store.create())
        store.move(ids[-1], S.OPEN, S.FAILED, "", RoundUpdate())
        store.move(ids[-1], S.FAILED, S.SETTLED_BY_RULE, "", RoundUpdate())
    seen, cursor, pages = [], None, 0
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        body = client.get("/v1/rounds", params=params).json()
        assert len(body["items"]) <= 2
        seen += [r["id"] for r in body["items"]]
        pages += 1
        cursor = body["next"]
        if cursor is None:
            break
    assert seen == ids[::-1] and pages == 3
    too_many = client.get("/v1/rounds", params={"limit": 501})
    assert too_many.status_code == 422 and "query.limit" in too_many.json()["detail"]
    forged = client.get("/v1/rounds", params={"cursor": "not-ours"})
    assert forged.status_code == 422 and "query.cursor" in forged.json()["detail"]


def test_a_round_shows_its_predicted_and_measured_epsilon(
    api: tuple[TestClient, SqlRoundStore],
) -> None:
    """The quote's ε(K*) from the open, the evaluation's test loss once measured."""
    client, store = api
    round_id = store.create()
    assert client.get(f"/v1/rounds/{round_id}").json()["predicted_epsilon"] is None
    quote = PricingResult(
        mechanism="swan", regime="low", type_names=["a"], participants=[2], buyers=[1],
        price=1.0, rewards=[0.5], welfare=1.0, epsilon=0.71, incentive_cost=0.0, optimal=True,
    )  # fmt: skip
    store.move(round_id, S.OPEN, S.COLLECTING, "", RoundUpdate(quote=quote))
    body = client.get(f"/v1/rounds/{round_id}").json()
    assert (body["predicted_epsilon"], body["measured_epsilon"]) == (0.71, None)
    store.move(round_id, S.COLLECTING, S.TRAINING, "", RoundUpdate())
    measured = EvaluationResult(
        round_id=round_id, test_loss=0.66, accuracy=None, seconds=1.0, fit=None
    )
    store.move(round_id, S.TRAINING, S.EVALUATING, "", RoundUpdate(evaluation=measured))
    (listed,) = client.get("/v1/rounds").json()["items"]
    assert (listed["predicted_epsilon"], listed["measured_epsilon"]) == (0.71, 0.66)


def test_a_round_may_have_its_own_subsidy_budget(api: tuple[TestClient, SqlRoundStore]) -> None:
    """POST /v1/rounds {"subsidy_budget": "2.5"} stores it; a loose amount is a 422 naming the
    field (and opens nothing); a client token is refused."""
    client, store = api
    operator = {"Authorization": "Bearer dev-operator-token"}
    for bad in ("+5", "1e3", -1, True):
        r = client.post("/v1/rounds", json={"subsidy_budget": bad}, headers=operator)
        assert r.status_code == 422 and "body.subsidy_budget" in r.json()["detail"], r.text
    assert store.latest(10) == []
    r = client.post("/v1/rounds", json={"subsidy_budget": "2.5"}, headers=operator)
    assert r.status_code == 202, r.text
    rnd = store.load(r.json()["round_id"])
    assert rnd is not None and rnd.subsidy_budget_micros == 2_500_000
    no_token = {"Authorization": "Bearer not-a-token"}
    r = client.post("/v1/rounds", json={"subsidy_budget": "1"}, headers=no_token)
    assert r.status_code == 401


def test_a_round_may_have_its_own_collection_window(
    api: tuple[TestClient, SqlRoundStore],
) -> None:
    """POST /v1/rounds {"collect_seconds": 120} stores it; outside [1, 86400] (or not a number)
    a 422 names body.collect_seconds and the bound, and opens nothing."""
    client, store = api
    operator = {"Authorization": "Bearer dev-operator-token"}
    for bad, bound in (
        (0.5, "greater than or equal to 1"),
        (86_401, "less than or equal to 86400"),
    ):
        r = client.post("/v1/rounds", json={"collect_seconds": bad}, headers=operator)
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        assert detail.startswith("body.collect_seconds: ") and bound in detail, detail
    r = client.post("/v1/rounds", json={"collect_seconds": "soon"}, headers=operator)
    assert r.status_code == 422 and "body.collect_seconds" in r.json()["detail"], r.text
    assert store.latest(10) == []
    r = client.post("/v1/rounds", json={"collect_seconds": 120}, headers=operator)
    assert r.status_code == 202, r.text
    rnd = store.load(r.json()["round_id"])
    assert rnd is not None and rnd.collect_seconds == 120.0


def test_a_round_is_whole_for_the_operator_and_a_clients_view_for_any_client(
    api: tuple[TestClient, SqlRoundStore],
) -> None:
    """The market owns membership (issue 25): the orchestration keeps no member list, so it does
    not tell members from others. What a client reads holds nothing private to members (the
    quote is every client's at the market, the figures are per type, a per-participant outcome
    is the reader's own only), so any authenticated client reads the client's view (no
    scenario: other types' costs; no ledger settlement) and sees the round listed; only the
    operator reads it whole; no token or a bad one is 401 (issue 13)."""
    import time

    from mots.platform import tokens
    from mots.platform.api.rounds import SUMMARY_EXAMPLE, RoundSummary
    from mots.platform.settings import DEV_TOKEN_SECRET

    client, store = api
    mine = store.create()
    store.move(mine, S.OPEN, S.COLLECTING, "priced", RoundUpdate(mechanism="swan"))
    summary = RoundSummary.model_validate(
        SUMMARY_EXAMPLE
        | {
            "round_id": mine,
            "dropped": [3],
            "failed_verification": [],
            "verification": {"3": "dropped"},
        }
    )
    store.move(mine, S.COLLECTING, S.FAILED, "", RoundUpdate(summary=summary))

    def auth(client_id: int) -> dict[str, str]:
        token = tokens.sign(client_id, int(time.time()) + 600, DEV_TOKEN_SECRET)
        return {"Authorization": f"Bearer {token}"}

    for who in (3, 9):
        r = client.get(f"/v1/rounds/{mine}", headers=auth(who))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["id"] == mine and body["scenario"] is None
        assert body["summary"]["verification"] == ({"3": "dropped"} if who == 3 else {})
        listed = client.get("/v1/rounds", headers=auth(who)).json()["items"]
        assert [r["id"] for r in listed] == [mine]
    for bad in ({"Authorization": ""}, {"Authorization": "Bearer x"}):
        assert client.get(f"/v1/rounds/{mine}", headers=bad).status_code == 401
        assert client.get("/v1/rounds", headers=bad).status_code == 401
    whole = client.get(f"/v1/rounds/{mine}").json()  # the operator (default headers)
    assert whole["summary"]["verification"] == {"3": "dropped"}


def test_the_rounds_quote_shows_its_amounts_as_booked_money(
    api: tuple[TestClient, SqlRoundStore],
) -> None:
    """The pricing service's float terms leave the round API as six-place strings, rounded once
    as the market books them; welfare and ε stay floats (issue 17: one money shape)."""
    client, store = api
    round_id = store.create()
    quote = PricingResult(
        mechanism="swan_robust", regime="low", type_names=["a", "b"], participants=[0, 5],
        buyers=[10, 0], price=1.0499999999999972, rewards=[-0.9000000000000004, 0.45],
        welfare=454.33, epsilon=0.673, incentive_cost=0.30000000000000004, optimal=True,
    )  # fmt: skip
    store.move(round_id, S.OPEN, S.COLLECTING, "", RoundUpdate(quote=quote))
    got = client.get(f"/v1/rounds/{round_id}").json()["quote"]
    assert (got["price"], got["rewards"], got["incentive_cost"]) == (
        "1.050000",
        ["-0.900000", "0.450000"],
        "0.300000",
    )
    assert (got["welfare"], got["epsilon"], got["participants"]) == (454.33, 0.673, [0, 5])


def test_a_clients_view_keeps_only_its_own_outcome() -> None:
    """A client's view of a finished round: no scenario, no ledger settlement, and of the
    per-participant outcomes only its own."""
    from datetime import UTC, datetime

    from mots.platform.api.rounds import RoundOut, RoundSummary
    from services.orchestration.api.routes.rounds import _client_view

    summary = RoundSummary.model_construct(
        dropped=[2, 5],
        failed_verification=[7],
        verification={"2": "dropped", "5": "dropped", "7": "failed_verification", "9": "verified"},
        settlement={"paid": "secret"},
    )
    out = RoundOut.model_construct(
        id=1, state=S.PUBLISHED, created_at=datetime.now(UTC), scenario={"x": 1}, summary=summary
    )
    seen = _client_view(out, 5)
    assert seen.scenario is None and seen.summary is not None
    assert seen.summary.settlement is None
    assert (seen.summary.dropped, seen.summary.failed_verification) == ([5], [])
    assert seen.summary.verification == {"5": "dropped"}
    assert _client_view(out, 9).summary.verification == {"9": "verified"}  # type: ignore[union-attr]


def test_a_round_names_its_task_one_in_flight_per_task(
    api: tuple[TestClient, SqlRoundStore],
) -> None:
    """POST /v1/rounds {"task": "digits"} opens a digits round beside a fashion-mnist one; a
    second of either is a 409 naming task; an unknown task is a 404 and a malformed name a 422,
    both naming the field, and neither opens anything."""
    client, store = api
    for bad, code in (("no-such-task", 404), ("Digits!", 422), ("", 422)):
        r = client.post("/v1/rounds", json={"task": bad})
        assert r.status_code == code, r.text
        assert "task" in r.json()["detail"].split(":")[0], r.text
    assert store.latest(10) == []
    fashion = client.post("/v1/rounds")
    digits = client.post("/v1/rounds", json={"task": "digits"})
    assert fashion.status_code == digits.status_code == 202, (fashion.text, digits.text)
    for again in ({}, {"task": "digits"}):
        r = client.post("/v1/rounds", json=again)
        assert r.status_code == 409 and r.json()["detail"].startswith("task: "), r.text
    shown = {r["id"]: r["task"] for r in client.get("/v1/rounds").json()["items"]}
    assert shown == {
        fashion.json()["round_id"]: "fashion-mnist",
        digits.json()["round_id"]: "digits",
    }


def test_a_task_no_file_names_is_asked_of_the_market_and_its_absence_is_a_503(
    tmp_path: Path,
) -> None:
    """With MOTS_MARKET_INTERNAL_URL set and the market not answering, a task no file names is a
    503 naming ``task`` (not a 404: the market may store it); file tasks and the default task
    still open (the market's own check refuses a retired one at the open); nothing else opens."""
    from mots.local.launcher import free_port

    url = f"sqlite:///{tmp_path / 'orchestration.db'}"
    upgrade(url)
    market = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings = Settings(
        database_url=url, redis_key_prefix="mots-api-test:", market_internal_url=market
    )
    engine = make_engine(url)
    with TestClient(create_app(settings), headers=OPERATOR) as client:
        r = client.post("/v1/rounds", json={"task": "only-at-the-market"})
        assert r.status_code == 503, r.text
        assert r.json()["detail"].startswith("task: ") and "market" in r.json()["detail"]
        assert SqlRoundStore(make_sessionmaker(engine)).latest(10) == []
        for body in ({}, {"task": "digits"}):
            assert client.post("/v1/rounds", json=body).status_code == 202
    engine.dispose()


def test_a_round_shows_the_task_version_it_was_opened_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: POST /v1/rounds pins the task's current version (a market-only task: the
    market's latest stored one; a task file: its ``version:``); the round shows it as
    ``task_version`` (documented in the OpenAPI schema), unchanged once a newer one is stored."""
    from tests.mots.tasks.test_stored import NAME, URL, fake_market, task_text

    market = fake_market(monkeypatch)
    market.store(task_text(1))
    url = f"sqlite:///{tmp_path / 'orchestration.db'}"
    upgrade(url)
    settings = Settings(
        database_url=url, redis_key_prefix="mots-api-test:", market_internal_url=URL
    )
    with TestClient(create_app(settings), headers=OPERATOR) as client:
        stored = client.post("/v1/rounds", json={"task": NAME})
        digits = client.post("/v1/rounds", json={"task": "digits"})
        assert stored.status_code == digits.status_code == 202, (stored.text, digits.text)
        market.store(task_text(2))
        shown = client.get(f"/v1/rounds/{stored.json()['round_id']}").json()
        listed = {r["task"]: r["task_version"] for r in client.get("/v1/rounds").json()["items"]}
        schema = client.get("/openapi.json").json()["components"]["schemas"]["RoundOut"]
    assert (shown["task"], shown["task_version"]) == (NAME, 1)
    assert listed == {NAME: 1, "digits": 1}
    assert "pinned" in schema["properties"]["task_version"]["description"]
