"""Tasks stored by the market (issue 36): created from a task file's content by the operator,
listed and shown by anyone with a token, versioned and retired; a malformed file is refused with
every problem listed by field and nothing stored. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient

from mots.tasks.task_file import SHIPPED_DIR, inline_task_text
from tests.services.market.conftest import OPERATOR


def _content(name: str = "digits", **changes: object) -> str:
    data = yaml.safe_load((SHIPPED_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    data.update(changes)
    return yaml.safe_dump(data, sort_keys=False)


def _create(market: TestClient, content: str, headers: dict[str, str] = OPERATOR) -> Any:
    return market.post("/v1/tasks", json={"content": content}, headers=headers)


def test_the_operator_creates_versions_lists_shows_and_retires_tasks(
    market: TestClient, register
) -> None:
    """Create digits v1 and the inlined fashion-mnist, then digits v2: the list shows each task
    at its latest version, a client reads them, v1 stays readable; an equal or lower version is
    a 409; retiring marks every version and a client may not retire nor create."""
    created = _create(market, _content())
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["name"], body["version"], body["status"]) == ("digits", 1, "active")
    assert body["spec"]["model"]["architecture"] == "mlp"
    assert body["content"] == _content()
    fashion = inline_task_text(SHIPPED_DIR / "fashion-mnist.yaml")
    assert _create(market, fashion).status_code == 201
    assert _create(market, _content(version=2, description="v2")).status_code == 201
    again = _create(market, _content())
    assert again.status_code == 409 and again.json()["detail"].startswith("version: ")

    client = register()
    listed = market.get("/v1/tasks", headers=client["auth"])
    assert listed.status_code == 200, listed.text
    assert [(t["name"], t["version"]) for t in listed.json()["items"]] == [
        ("digits", 2),
        ("fashion-mnist", 1),
    ]
    paged = market.get("/v1/tasks?limit=1", headers=OPERATOR).json()
    assert [t["name"] for t in paged["items"]] == ["digits"]
    rest = market.get(f"/v1/tasks?limit=1&cursor={paged['next']}", headers=OPERATOR).json()
    assert [t["name"] for t in rest["items"]] == ["fashion-mnist"] and rest["next"] is None
    assert market.get("/v1/tasks/digits", headers=client["auth"]).json()["description"] == "v2"
    v1 = market.get("/v1/tasks/digits?version=1", headers=client["auth"]).json()
    assert v1["version"] == 1 and v1["description"].startswith("Recognise")
    versions = market.get("/v1/tasks/digits/versions", headers=OPERATOR).json()["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    missing = market.get("/v1/tasks/cifar", headers=OPERATOR)
    assert missing.status_code == 404 and missing.json()["detail"].startswith("name: ")

    assert market.delete("/v1/tasks/digits", headers=client["auth"]).status_code == 403
    assert _create(market, _content(version=3), client["auth"]).status_code == 403
    retired = market.delete("/v1/tasks/digits", headers=OPERATOR)
    assert retired.status_code == 200 and retired.json()["status"] == "retired"
    versions = market.get("/v1/tasks/digits/versions", headers=OPERATOR).json()["versions"]
    assert {v["status"] for v in versions} == {"retired"}
    back = _create(market, _content(version=3))
    assert back.status_code == 201 and back.json()["status"] == "active"


def test_a_malformed_task_file_is_refused_with_every_problem_and_nothing_stored(
    market: TestClient,
) -> None:
    """Each kind of mistake at once (name, version, labels, architecture, mechanism, a scenario
    file path, a missing section): one 422 naming every field under body.content; no task is
    stored. Not YAML at all: one problem for the file. A client token may not create."""
    data = yaml.safe_load(_content())
    data.update(name="Digits!", version=0)
    data["data"]["labels"] = ["0", "0"]
    data["model"]["architecture"] = "no-such-net"
    data["economics"]["mechanism"] = "auction"
    data["economics"]["scenario"] = "../scenarios/platform_demo.yaml"
    del data["rounds"]
    r = _create(market, yaml.safe_dump(data))
    assert r.status_code == 422, r.text
    fields = {e["field"] for e in r.json()["errors"]}
    assert fields == {
        "body.content.name",
        "body.content.version",
        "body.content.data.labels",
        "body.content.model.architecture",
        "body.content.economics.mechanism",
        "body.content.economics.scenario",
        "body.content.rounds",
    }, r.json()
    assert "give the scenario inline" in r.json()["detail"]
    not_yaml = _create(market, "name: [unclosed")
    assert not_yaml.status_code == 422
    assert [e["field"] for e in not_yaml.json()["errors"]] == ["body.content"]
    assert _create(market, "").status_code == 422
    laughs = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"  # aliases: refused, not expanded
    refused = _create(market, laughs)
    assert refused.status_code == 422 and "aliases" in refused.json()["detail"], refused.text
    deep = _create(market, "[" * 100_000)
    assert deep.status_code == 422 and deep.json()["errors"][0]["field"] == "body.content"
    assert market.get("/v1/tasks", headers=OPERATOR).json()["items"] == []


def test_shipped_task_files_are_accepted_as_the_cli_sends_them(
    market: TestClient, tmp_path: Path
) -> None:
    """Every shipped task, inlined as `mots tasks create` sends it, is stored as its file says."""
    for path in sorted(SHIPPED_DIR.glob("*.yaml")):
        r = _create(market, inline_task_text(path))
        assert r.status_code == 201, (path, r.text)
        assert r.json()["name"] == path.stem
