"""Errors in one shape (RFC 9457 problem+json) and strict JSON bodies, on an app of the factory."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI, HTTPException
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from mots.platform.problem_types import PROBLEM_TYPES
from mots.platform.problems import (
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    BodyRefused,
    install_problem_handlers,
    strict_loads,
)
from mots.platform.settings import PlatformSettings
from mots.platform.web import service_app


class Body(BaseModel):
    x: float = Field(..., ge=0, allow_inf_nan=False)
    name: str = "n"


def _app() -> TestClient:
    router = APIRouter()

    @router.post("/v1/echo")
    def echo(body: Body) -> dict[str, Any]:
        return body.model_dump()

    @router.get("/v1/teapot")
    def teapot() -> None:
        raise HTTPException(418, "kettle: the teapot refuses", headers={"X-Why": "tea"})

    @router.get("/v1/boom")
    def boom() -> None:
        raise RuntimeError("secret internals")

    app = service_app("demo", "A demonstration.", PlatformSettings(), [router])
    return TestClient(app, raise_server_exceptions=False)


def _is_problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["type"] == f"urn:mots:problem:{body['code']}"
    assert body["code"] in PROBLEM_TYPES and body["request_id"] == r.headers["x-request-id"]
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    r.content.decode("ascii")  # never a character a client could fail to decode
    return body


@pytest.mark.parametrize(
    "raw",
    [
        '{"x": NaN}',
        '{"x": Infinity}',
        '{"x": -Infinity}',
        '{"x": 1e400}',
        '{"x": -1e999}',
        '{"x": 1, "name": "\\ud800"}',
        '{"x": 1, "name": "a\\u0000b"}',
        '{"x": 1, "\\udfff": 2}',
        '{"x": ' + "9" * 50 + "}",
        '{"x": 1',
        "[]",
        '{"x": "1e400"}',
        '{"x": "nan"}',
        '{"x": -1}',
    ],
)
def test_malformed_bodies_are_422_problems_that_never_echo_the_input(raw: str) -> None:
    """Non-finite numbers, surrogates, NUL, huge integers, bad JSON, broken rules: one shape."""
    with _app() as client:
        r = client.post("/v1/echo", content=raw, headers={"content-type": "application/json"})
        body = _is_problem(r, 422)
        assert body["errors"] and all(e["field"] and e["msg"] for e in body["errors"])
        assert "ud800" not in r.text.lower() or "surrogate" in body["detail"]


def test_http_errors_unknown_routes_and_failures_are_problems() -> None:
    """An HTTPException keeps its status, detail and headers; 404/405 and a 500 are problems."""
    with _app() as client:
        body = _is_problem(client.get("/v1/teapot"), 418)
        assert body["detail"] == "kettle: the teapot refuses"
        assert client.get("/v1/teapot").headers["X-Why"] == "tea"
        _is_problem(client.get("/nowhere"), 404)
        _is_problem(client.delete("/v1/echo"), 405)
        failed = _is_problem(client.get("/v1/boom"), 500)
        assert "secret" not in failed["detail"]
        assert client.post("/v1/echo", json={"x": 2.5}).json() == {"x": 2.5, "name": "n"}


def test_a_405_allows_every_method_of_its_path() -> None:
    """Issue 37: ``Allow`` lists the methods of every route of the path (Starlette's named only
    the first route's), and a path named literally (``/v1/things/bulk``) is not read as an id by
    a templated route: its other methods are 405 with its own ``Allow``, not a 422 on the id."""
    router = APIRouter()

    @router.get("/v1/things")
    def things() -> list[int]:
        return []

    @router.post("/v1/things")
    def add() -> int:
        return 1

    @router.post("/v1/things/bulk")
    def bulk() -> int:
        return 2

    @router.delete("/v1/things/{thing_id}")
    def remove(thing_id: int) -> int:
        return thing_id

    app = service_app("demo", "A demonstration.", PlatformSettings(), [router])
    with TestClient(app) as client:
        r = client.options("/v1/things")
        assert _is_problem(r, 405) and r.headers["allow"] == "GET, POST"
        r = client.delete("/v1/things/bulk")
        body = _is_problem(r, 405)
        assert r.headers["allow"] == "POST" and "DELETE" in body["detail"]
        r = client.put("/v1/things/7")
        assert _is_problem(r, 405) and r.headers["allow"] == "DELETE"
        assert _is_problem(client.delete("/v1/things/x7"), 422)["errors"][0]["field"] == (
            "path.thing_id"
        )
        assert client.delete("/v1/things/7").json() == 7


def test_an_oversized_body_is_413() -> None:
    with _app() as client:
        raw = '{"x": 1, "name": "' + "a" * MAX_BODY_BYTES + '"}'
        _is_problem(
            client.post("/v1/echo", content=raw, headers={"content-type": "application/json"}), 413
        )


def test_the_openapi_documents_the_problem_body() -> None:
    with _app() as client:
        spec = client.get("/openapi.json").json()
    assert "Problem" in spec["components"]["schemas"]
    assert "4XX" in spec["paths"]["/v1/echo"]["post"]["responses"]


_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(_json)
def test_strict_loads_reads_every_finite_document_as_json_does(value: Any) -> None:
    """What a well-behaved client sends (json.dumps of finite data) parses to the same value."""
    for raw in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        assert strict_loads(raw.encode()) == json.loads(raw)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e309", "-2E+400"]), _json)
def test_strict_loads_refuses_non_finite_numbers_anywhere(bad: str, value: Any) -> None:
    raw = json.dumps({"v": value, "w": "PLACEHOLDER"}).replace('"PLACEHOLDER"', bad)
    with pytest.raises(BodyRefused):
        strict_loads(raw.encode())


def test_a_database_that_cannot_be_reached_is_a_503_with_retry_after() -> None:
    """A real connection refused (PostgreSQL's port with nothing listening, and a pool with no
    connection left) answers 503 with Retry-After, never a 500: nothing was booked, so the
    client may repeat the request."""
    import socket

    from sqlalchemy import create_engine, text

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{port}/none")
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/booked")
    def booked() -> dict[str, int]:
        with engine.connect() as conn:
            return {"one": conn.execute(text("SELECT 1")).scalar_one()}

    r = TestClient(app, raise_server_exceptions=False).get("/booked")
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "1"
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["detail"].startswith("database: briefly unavailable")


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 1000 + "]" * 1000,
        '{"a":' * 1000 + "1" + "}" * 1000,
        "[" * 100_000 + "]" * 100_000,
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
        '{"x": 1, "name": "a", "name": "b"}',
        '{"x": 1, "nested": {"k": 1, "k": 2}}',
        '{"x": 1, "x": 2}',
    ],
)
def test_deep_and_duplicated_bodies_are_422_before_any_route(raw: str) -> None:
    """Nesting beyond the limit (found before parsing: no recursion) and a key given twice."""
    with _app() as client:
        r = client.post("/v1/echo", content=raw, headers={"content-type": "application/json"})
        body = _is_problem(r, 422)
        assert "deeper" in body["detail"] or "twice" in body["detail"]


def test_nesting_to_the_limit_and_brackets_inside_strings_are_admitted() -> None:
    assert strict_loads(("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH).encode())
    text = '{"x": "' + "[" * 100 + '\\"{{{{"}'
    assert strict_loads(text.encode()) == {"x": "[" * 100 + '"{{{{'}


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream", None],
)
def test_an_announced_oversized_body_of_any_type_is_413_before_it_is_read(
    content_type: str | None,
) -> None:
    """Content-Length beyond the cap: 413 with no byte of the body taken from the server."""
    app = _app().app
    taken: list[int] = []

    async def receive() -> dict[str, Any]:
        taken.append(1)
        return {"type": "http.request", "body": b"x" * 65536, "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-length", b"50000000")]
    headers += [(b"content-type", content_type.encode())] if content_type else []
    scope = {"type": "http", "method": "POST", "path": "/v1/echo", "headers": headers,
             "query_string": b"", "http_version": "1.1", "scheme": "http", "root_path": "",
             "server": ("t", 80), "client": ("c", 1)}  # fmt: skip
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 413 and not taken


def test_a_streamed_body_of_any_type_stops_being_read_at_the_cap() -> None:
    """A chunked body with no Content-Length: read no further than the cap, then 413."""
    app = _app().app
    taken: list[int] = []

    async def receive() -> dict[str, Any]:
        taken.append(65536)
        return {"type": "http.request", "body": b"x" * 65536, "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/echo",
             "headers": [(b"content-type", b"text/plain")], "query_string": b"",
             "http_version": "1.1", "scheme": "http", "root_path": "", "server": ("t", 80),
             "client": ("c", 1)}  # fmt: skip
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 413
    assert sum(taken) <= MAX_BODY_BYTES + 65536
